"""Analyses the benchmark papers publish from model outputs, computed from run directories on disk.

``agreement``: kappa, Fleiss' kappa, Krippendorff's alpha, adaptive-tie human alignment. ``cove``: CoVEBench
§4.2 / App. G (human alignment, judge-human agreement, judge stability, Figure 4 breakdowns, Figure 5
correlations, Table 8 category levels). ``vidic``: ViDiC Table 3 judge-human concordance and multi-round judge
stability. Input formats: docs/analyses.md.
"""
