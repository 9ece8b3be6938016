"""First step of moving CalibrationStudy / CalibrationTrace to the agreement app.

The tables are renamed to the names Django gives the models in their new
app (``agreement_calibrationstudy``, ``agreement_calibrationtrace``) instead
of pinning the old names with ``Meta.db_table``: the schema then reads like
the folder list, and nothing in the new app carries a legacy name. A rename
moves no rows (``ALTER TABLE ... RENAME``; SQLite >= 3.26 and PostgreSQL
keep the foreign keys pointing at the renamed table), so no data is copied.
``agreement.0001`` then adds the models to the new app's state and
``scoring.0005`` removes them from this one, both without touching the
database (tests/agreement/test_migration.py migrates real rows through it).
"""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("scoring", "0003_calibration"),
    ]

    operations = [
        migrations.AlterModelTable(name="calibrationstudy", table="agreement_calibrationstudy"),
        migrations.AlterModelTable(name="calibrationtrace", table="agreement_calibrationtrace"),
    ]
