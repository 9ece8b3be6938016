from django.apps import AppConfig


class FaithfulnessConfig(AppConfig):
    name = "faithfulness"
    verbose_name = "Faithfulness and evidence tiers"
    #: Module whose @register calls add export kinds (scoring.exports loads it on first use).
    export_kinds = "faithfulness.export_kinds"

    def ready(self) -> None:
        from faithfulness import runkinds
        from faithfulness.evidence import evidence_tier_cards
        from faithfulness.runclient import FaithfulnessClient
        from runs.clients import register
        from scoring.analytics import register_tier_source

        register(FaithfulnessClient())  # interventions and anytime profiles are runs of the run engine
        runkinds.declare()  # the runs page and the API start them
        # The leaderboard's tier card comes from the evidence report (one source of the tiers).
        register_tier_source(evidence_tier_cards)
