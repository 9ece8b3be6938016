"""The abstraction pages, REST endpoints and exports: members see them, outsiders get 404; the table
shows truncated values with intervals and the paper overlay; the paired view links each trace."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from abstraction.importing import import_outputs
from abstraction.models import Result
from tests.data_paths import ABSTRACTION_SAMPLE

pytestmark = pytest.mark.django_db


@pytest.fixture
def imported(study):
    report = import_outputs(study, ABSTRACTION_SAMPLE, model="gpt-4o-mini")
    assert report.committed
    return study


def test_a_member_sees_the_table_with_truncated_values_and_intervals(client, member, imported):
    client.force_login(member)
    page = client.get(f"/studies/{imported.pk}/abstraction/?reference=1&gamma=0.6&delta=0.2").content.decode()
    assert "gpt-4o-mini (DP)" in page and ">0.98<" in page  # 95/96 = 0.9895..., truncated
    assert ">0.83<" in page  # Δ_ALL = 80/96 = 0.8333
    assert "imported" in page and "paper: GPT-4o-mini" in page and "chart-quadrant" in page
    assert "\\u03b3 = 0.6, \\u03b4 = 0.2" in page  # the chart title, JSON-escaped


def test_an_outsider_gets_404_everywhere(client, outsider, imported):
    client.force_login(outsider)
    for url in (f"/studies/{imported.pk}/abstraction/", f"/studies/{imported.pk}/abstraction/items/",
                f"/studies/{imported.pk}/abstraction/download/?format=csv",
                f"/api/v1/studies/{imported.pk}/abstraction/table/",
                f"/api/v1/studies/{imported.pk}/abstraction/items/"):
        assert client.get(url).status_code == 404, url


def test_the_paired_view_shows_every_variant_and_links_each_trace(client, owner, imported):
    client.force_login(owner)
    page = client.get(f"/studies/{imported.pk}/abstraction/items/?benchmark=published&task=fixed_len_chat_bit"
                      f"&instance=0").content.decode()
    for variant in ("fixed_len_chat_bit_raw_dataset", "fixed_len_chat_bit_dataset", "fixed_len_chat_bit_num_dataset",
                    "fixed_len_chat_bit_op_dataset"):
        assert variant in page
    for r in Result.objects.filter(item__instance=0):
        assert f'href="/traces/{r.trace_id}/"' in page


def test_the_list_pages_do_not_query_per_row(client, owner, imported):
    client.force_login(owner)
    url = f"/studies/{imported.pk}/abstraction/items/?benchmark=published&task=fixed_len_chat_bit&instance=1"
    with CaptureQueriesContext(connection) as few:
        client.get(url)
    with CaptureQueriesContext(connection) as api:
        client.get(f"/api/v1/studies/{imported.pk}/abstraction/items/?limit=300")
    with CaptureQueriesContext(connection) as api_small:
        client.get(f"/api/v1/studies/{imported.pk}/abstraction/items/?limit=3")
    assert len(api) == len(api_small) and len(few) < 30


def test_the_api_table_and_items(client, member, imported):
    client.force_login(member)
    data = client.get(f"/api/v1/studies/{imported.pk}/abstraction/table/?resamples=200").json()
    (row,) = data["rows"]
    assert row["checker"] == "imported" and row["delta_all"] == pytest.approx(80 / 96)
    assert row["sub_datasets"]["fixed_len_chat_bit_op_dataset"] == pytest.approx(69 / 96)
    assert data["benchmarks"][0]["benchmark"] == "published"
    items = client.get(f"/api/v1/studies/{imported.pk}/abstraction/items/?task=fixed_len_chat_bit&instance=3").json()
    assert items["count"] == 4 and {r["variant"] for r in items["results"]} == {"raw", "all", "num", "op"}
    bad = client.get(f"/api/v1/studies/{imported.pk}/abstraction/items/?limit=5000")
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "limit"
    bad = client.get(f"/api/v1/studies/{imported.pk}/abstraction/table/?resamples=x")
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "resamples"
    # Each bad number names its own field (the query serializers), not a shared one.
    for query, field in (("offset=-1", "offset"), ("instance=x", "instance"), ("limit=0", "limit")):
        bad = client.get(f"/api/v1/studies/{imported.pk}/abstraction/items/?{query}")
        assert bad.status_code == 400 and [e["field"] for e in bad.json()["errors"]] == [field], query
    assert client.get(f"/api/v1/studies/{imported.pk}/abstraction/items/?instance=").status_code == 200


def test_downloads_in_every_format_with_a_manifest(client, member, imported):
    client.force_login(member)
    base = f"/studies/{imported.pk}/abstraction/download/"
    csv = client.get(base + "?format=csv").content.decode()
    assert csv.startswith("model,checker,n_items,BC,EC") and "gpt-4o-mini (DP),imported,384" in csv
    parquet = client.get(base + "?format=parquet&what=abstraction-items").content
    frame = pd.read_parquet(io.BytesIO(parquet))
    assert len(frame) == 384 and set(frame["variant"]) == {"raw", "all", "num", "op"}
    manifest = json.loads(client.get(base + "?format=jsonl&manifest=1").content)
    info = manifest["abstraction"]
    assert info["benchmarks"][0]["remap_mode"] == "as published"
    assert info["checkers"] == {"gpt-4o-mini (DP)": "imported"} and manifest["code_version"]
    assert client.get(base + "?format=xls").status_code == 400


def test_export_command_writes_the_table_and_its_manifest(imported, tmp_path):
    out = tmp_path / "abstraction.csv"
    call_command("export", study=imported.name, what="abstraction", out=str(out), stdout=io.StringIO())
    assert "gpt-4o-mini (DP)" in out.read_text()
    manifest = json.loads((tmp_path / "abstraction.csv.manifest.json").read_text())
    assert manifest["abstraction"]["checker_version"] == "abstraction-check/1"


def test_the_table_downloads_in_long_format_with_the_pages_numbers(client, member, imported):
    # Issue 23 item 10: the Γ_d per sub-dataset were one JSON cell; the long table has one row each.
    from abstraction import services

    client.force_login(member)
    page = client.get(f"/studies/{imported.pk}/abstraction/").content.decode()
    assert "what=abstraction-long&amp;format=csv" in page
    body = client.get(f"/studies/{imported.pk}/analytics/export/?what=abstraction-long&format=csv").content.decode()
    frame = pd.read_csv(io.StringIO(body), keep_default_na=False)
    gamma = frame.loc[frame["statistic"] == "gamma_d"]
    assert len(gamma) == 4 and not any(str(v).startswith("{") for v in frame["value"])
    (row,) = services.table(imported, n_resamples=1000)
    d = row.result.as_dict()
    got = dict(zip(gamma["group"], gamma["value"].astype(float), strict=True))
    assert got == pytest.approx(d["sub_datasets"])
    delta = frame.loc[frame["statistic"] == "delta_all"].iloc[0]
    assert float(delta["value"]) == pytest.approx(d["delta_all"])
