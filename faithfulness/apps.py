from django.apps import AppConfig


class FaithfulnessConfig(AppConfig):
    name = "faithfulness"
    verbose_name = "Faithfulness and evidence tiers"
    #: Module whose @register calls add export kinds (scoring.exports loads it on first use).
    export_kinds = "faithfulness.export_kinds"
    #: Module whose declare() declares its kinds of run (runs.kinds loads it when the kinds are first read).
    run_kinds = "faithfulness.runkinds"

    def ready(self) -> None:
        from annotation.signals import data_changed
        from faithfulness import stored_evidence
        from faithfulness.runclient import FaithfulnessClient
        from runs.clients import register
        from scoring.hooks import register_summary, register_tier_source

        register(FaithfulnessClient())  # interventions and anytime profiles are runs of the run engine
        # The leaderboard's tier card comes from the evidence report (one source of the tiers).
        register_tier_source("faithfulness.evidence.evidence_tier_cards")
        # Its per-model evidence is stored by the score job and dropped when the data changes.
        register_summary("faithfulness.evidence.refresh_summaries")
        data_changed.connect(stored_evidence.invalidate, dispatch_uid="faithfulness.evidence_on_data_changed")
