"""Token buckets and daily quotas, on a clock the test moves (no sleeping)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from serve_app.auth import ApiKey, LimitBook


class Clock:
    def __init__(self, start_s: float) -> None:
        self.now_s = start_s

    def __call__(self) -> float:
        return self.now_s


NOON_S = datetime(2026, 12, 2, 12, 0, tzinfo=UTC).timestamp()


@pytest.fixture
def clock() -> Clock:
    return Clock(NOON_S)


def test_a_burst_passes_then_the_rate_refuses_and_says_when_to_come_back(clock):
    book, key = LimitBook(clock), ApiKey(id="acme", rate_per_s=2.0, burst=3)
    assert [book.take(key, job=False).allowed for _ in range(3)] == [True, True, True]
    refused = book.take(key, job=False)
    assert (refused.allowed, refused.code, refused.retry_after_s) == (False, "rate_limited", 0.5)
    clock.now_s += 0.25
    assert book.take(key, job=False).retry_after_s == pytest.approx(0.25)
    clock.now_s += 0.25
    assert book.take(key, job=False).allowed


def test_the_bucket_defaults_to_one_second_of_the_rate(clock):
    book, key = LimitBook(clock), ApiKey(id="acme", rate_per_s=2.5)
    assert [book.take(key, job=False).allowed for _ in range(4)] == [True, True, True, False]


def test_the_daily_quota_counts_jobs_only_and_renews_at_utc_midnight(clock):
    book, key = LimitBook(clock), ApiKey(id="acme", daily_quota=2)
    assert [book.take(key, job=True).allowed for _ in range(2)] == [True, True]
    assert book.take(key, job=False).allowed  # a status poll is not a job
    refused = book.take(key, job=True)
    assert (refused.allowed, refused.code, refused.retry_after_s) == (False, "quota_exceeded", 12 * 3600)
    assert book.usage(key).jobs_today == 2
    clock.now_s += 12 * 3600
    assert book.take(key, job=True).allowed
    assert (book.usage(key).day, book.usage(key).jobs_today) == ("2026-12-03", 1)


def test_a_refused_request_spends_nothing(clock):
    book, key = LimitBook(clock), ApiKey(id="acme", rate_per_s=1.0, burst=1, daily_quota=5)
    assert book.take(key, job=True).allowed
    assert book.take(key, job=True).code == "rate_limited"
    assert book.usage(key).jobs_today == 1  # the refused job was not counted


def test_keys_do_not_share_buckets(clock):
    book = LimitBook(clock)
    first, second = ApiKey(id="a", rate_per_s=1.0, burst=1), ApiKey(id="b", rate_per_s=1.0, burst=1)
    assert book.take(first, job=False).allowed and not book.take(first, job=False).allowed
    assert book.take(second, job=False).allowed
