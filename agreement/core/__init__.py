"""Pure agreement core of ReasonAudit (no Django, no ORM, no I/O), one module
per subject; users' documentation: ``docs/agreement.md``. Import the module
you use (this package re-exports nothing).

pairs        input validation; pairing two sources' steps and traces
steps        percent agreement, Cohen's kappa, confusion, by position, disagreements
first_error  first-error agreement and the ProcessBench accuracies / F1
correlation  Pearson / Spearman with bootstrap intervals (scores, ratings)
annotators   Krippendorff's alpha, Fleiss' kappa, pairwise kappa among annotators
calibration  ECE, Brier score and reliability of a candidate's confidences
intervals    bootstrap intervals for the point metrics above
metrics      every metric at once (the agreement metrics object)
tuning       tuning omega (and w) against a human reference

Intervals all resample through ``scoring.core.bootstrap``.
"""
