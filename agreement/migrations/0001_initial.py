"""The calibration models, moved here from ``scoring`` (see
``scoring/migrations/0004_rename_calibration_tables.py``): state only, the
tables already exist under these models' names."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ("annotation", "0003_review_workflow"),
        ("scoring", "0004_rename_calibration_tables"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='CalibrationStudy',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(max_length=200)),
                        ('reference', models.CharField(default='human', max_length=200)),
                        ('candidates', models.JSONField(default=list)),
                        ('profile_name', models.CharField(blank=True, max_length=100)),
                        ('seed', models.PositiveIntegerField(default=0)),
                        ('sample_size', models.PositiveIntegerField()),
                        ('allocation', models.CharField(choices=[('equal', 'equal per stratum'), ('proportional', 'proportional to stratum size')], default='equal', max_length=20)),
                        ('filters', models.JSONField(blank=True, default=dict)),
                        ('validation_fraction', models.FloatField(default=0.5)),
                        ('note', models.TextField(blank=True)),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('study', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='calibrations', to='annotation.study')),
                    ],
                    options={
                        'ordering': ['study', '-created_at', '-pk'],
                    },
                ),
                migrations.CreateModel(
                    name='CalibrationTrace',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('stratum', models.CharField(max_length=300)),
                        ('position', models.PositiveIntegerField()),
                        ('calibration', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='items', to='agreement.calibrationstudy')),
                        ('trace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='annotation.trace')),
                    ],
                    options={
                        'ordering': ['calibration', 'position'],
                    },
                ),
                migrations.AddConstraint(
                    model_name='calibrationstudy',
                    constraint=models.UniqueConstraint(fields=('study', 'name'), name='calibration_unique_name_per_study'),
                ),
                migrations.AddConstraint(
                    model_name='calibrationtrace',
                    constraint=models.UniqueConstraint(fields=('calibration', 'trace'), name='calibrationtrace_one_per_trace'),
                ),
            ],
            database_operations=[],
        ),
    ]
