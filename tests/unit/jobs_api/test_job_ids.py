"""A job id from the client is only ever a 404 when it names no job of the caller's (issue #32, finding 11): an id
whose expiry no date can hold (``ffffffffff-...`` is past year 9999) or that is not an id at all is never a 500."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from serve_app.runner.jobs_layout import is_job_id, new_job_id

HEX24 = "0123456789abcdef01234567"
OUT_OF_RANGE = [
    "ffffffffff-" + HEX24,  # 10 hex digits: past datetime's year 9999
    "3afff44180-" + HEX24,  # one second past 9999-12-31T23:59:59Z
    "ffffffffffff-" + HEX24,  # 12 hex digits
]
MALFORMED = [
    "not-a-job",
    "ffffffffff-" + HEX24[:-1],  # a digit short
    "FFFFFFFFFF-" + HEX24,  # upper case is not an id
    "6b10c79a-" + HEX24 + "0",
    "6b10c79a_" + HEX24,
]


@pytest.mark.parametrize("job_id", OUT_OF_RANGE + MALFORMED)
def test_an_out_of_range_or_malformed_job_id_is_404_on_get_result_and_delete(jobs_app, job_id):
    client = jobs_app.client
    for answer in (
        client.get(f"/v1/jobs/{job_id}"),
        client.get(f"/v1/jobs/{job_id}/result"),
        client.delete(f"/v1/jobs/{job_id}"),
    ):
        assert answer.status_code == 404, (answer.request.method, answer.request.url, answer.text)
        assert answer.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize("job_id", OUT_OF_RANGE)
def test_an_id_whose_expiry_no_date_holds_is_not_a_job_id(job_id):
    assert not is_job_id(job_id)


def test_the_last_representable_expiry_is_still_an_id():
    assert is_job_id("3afff4417f-" + HEX24)
    assert is_job_id(new_job_id(datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)))
