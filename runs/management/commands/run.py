from runs.cli import KindCommand


class Command(KindCommand):
    help = ("Start a run of any kind: run KIND --study S [--parameter value ...] [--wait]. The options are the "
            "kind's parameters, as the runs page and the REST API take them (run KIND --help lists them); --wait "
            "follows the run to its end (exit 1 unless every item succeeded).")
