"""The pure formulas of step importance (docs/step-importance.md): no Django, no ORM, no I/O."""
