from django.dispatch import Signal

# Sent after data that scores depend on changed (import, labels, judge run).
# Arguments: study, reason.
data_changed = Signal()
