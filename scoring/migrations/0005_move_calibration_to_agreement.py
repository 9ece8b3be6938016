"""Last step of moving the calibration models to the agreement app: they
leave this app's state; their tables (renamed in 0004) now belong to
``agreement.CalibrationStudy`` / ``agreement.CalibrationTrace``
(``agreement.0001``). State only: nothing is dropped."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("scoring", "0004_rename_calibration_tables"),
        ("agreement", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="CalibrationTrace"),
                migrations.DeleteModel(name="CalibrationStudy"),
            ],
            database_operations=[],
        ),
    ]
