"""Pure cores of the fidelity diagnostics (paper 001, docs/fidelity.md): no ORM, no I/O."""
