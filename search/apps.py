from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _ensure_index(sender, using: str = "default", **kwargs) -> None:
    from search.backends import ensure_index

    ensure_index(using)


class SearchConfig(AppConfig):
    name = "search"
    verbose_name = "search, cohorts and scanners"
    # The tables of its pages as downloads and `export --what search|cohorts|cohort-compare|scanner-*`.
    export_kinds = "search.export_kinds"
    #: Module whose declare() declares its kind of run, the scanner (runs.kinds loads it when the kinds are first read).
    run_kinds = "search.runkinds"

    def ready(self) -> None:
        # After every migrate: SQLite rebuilds a table to alter it and drops its triggers
        # (search.backends); this puts back what is missing, once per migrate.
        post_migrate.connect(_ensure_index, sender=self, dispatch_uid="search.ensure_index")
        from annotation import scopes
        from annotation.importing.pipeline import register_import_wrapper
        from runs import clients
        from search.backends import indexed_after
        from search.runclient import ScannerClient
        from search.services import cohort_choices, cohort_scope

        clients.register(ScannerClient())
        # A cohort as the scope of exports and calibration samples (agreement asks annotation, not search).
        scopes.register_scope("cohort", cohort_scope, cohort_choices)
        # An import's steps and problems join the SQLite index by one statement each at its end, not a trigger
        # run per row.
        register_import_wrapper(indexed_after)
