"""Judge configs for the ``vllm`` backend's tests, as the runner hands them to the backend (read-only nodes)."""

from omegaconf import OmegaConf

from vbench_ray.judges.base import JudgeConfig


def judge_cfg(**overrides):
    """A read-only judge config node (as the runner hands it to the backend) with ``overrides`` merged in."""
    cfg = OmegaConf.merge(OmegaConf.structured(JudgeConfig), OmegaConf.create(overrides))
    OmegaConf.set_readonly(cfg, True)
    return cfg


def vllm_cfg(model, env=None, **over):
    base = {
        "backend": "vllm",
        "model": str(model),
        "max_tokens": 16,
        "env_vars": env or {},
        "vllm": {"cpu": True, "max_model_len": 4096, "batch_size": 8},
        "video": {"fps": 2.0, "max_frames": 8, "max_pixels": 360 * 640},
    }
    return judge_cfg(**OmegaConf.to_container(OmegaConf.merge(OmegaConf.create(base), OmegaConf.create(over))))


ANSWER = {
    "choices": [{"message": {"content": "<answer>3.50</answer>"}}],
    "usage": {"prompt_tokens": 5, "completion_tokens": 4},
}


class FakeHandle:
    """The deployment handle's surface the Serve engine uses: ``options(...).judge_chat.remote(body)`` (the run's own
    deployment) and ``options(...).chat.remote(request)`` (an attached application). ``sent`` records each call as
    ``(method, what was sent)``; every call is answered with ``ANSWER``."""

    def __init__(self, method: str | None = None, sent: list | None = None):
        self.method, self.sent = method, [] if sent is None else sent

    def options(self, **_):
        return self

    def __getattr__(self, method):
        if method not in ("chat", "judge_chat"):
            raise AttributeError(method)
        return FakeHandle(method, self.sent)

    def remote(self, body):
        self.sent.append((self.method, body))
        return iter([ANSWER])
