"""Admission of built-in objects over HTTP, as a real apiserver answers it.

Unknown fields are dropped with a `Warning` header by default and refused under
`fieldValidation=Strict`; invalid values are refused. Where the issue text and a real cluster
differ, the cluster wins: a body that cannot be decoded as the kind at all (a strict unknown field,
a wrongly typed field) is `400 BadRequest` ("cannot be handled as a Pod: strict decoding error"),
while a decodable but invalid object is `422 Invalid`.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from kubesim.app import KubeSim

pytestmark = pytest.mark.kubesim_control


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "busybox"}], **spec},
    }


async def _post(
    sim: KubeSim, body: dict[str, Any], query: str = ""
) -> tuple[int, dict[str, Any], list[str]]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{sim.url}/api/v1/namespaces/default/pods{query}",
            data=json.dumps(body),
            headers={"Content-Type": "application/json", "User-Agent": "admission-test"},
        ) as response,
    ):
        # `299 - "text"`, with the text's quotes escaped as RFC 7234 quoted-strings require.
        warnings = [
            w.split(" ", 2)[2][1:-1].replace('\\"', '"')
            for w in response.headers.getall("Warning", [])
        ]
        return response.status, await response.json(), warnings


async def _get_pod(sim: KubeSim, name: str) -> tuple[int, dict[str, Any]]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{sim.url}/api/v1/namespaces/default/pods/{name}") as response,
    ):
        return response.status, await response.json()


async def test_unknown_field_is_dropped_with_a_warning_header_and_recorded(
    kubesim: KubeSim,
) -> None:
    body = _pod("typo")
    body["spec"]["containers"][0]["resources"] = {"request": {"cpu": "1"}}
    status, stored, warnings = await _post(kubesim, body)
    assert status == 201
    assert warnings, "the apiserver answers an unknown field with a Warning header"
    assert any('unknown field "spec.containers[0].resources.request"' in w for w in warnings)
    assert "request" not in stored["spec"]["containers"][0].get("resources", {})
    code, read = await _get_pod(kubesim, "typo")
    assert code == 200
    assert "request" not in read["spec"]["containers"][0].get("resources", {})
    recorded = kubesim.control.warnings(user_agent="admission-test")
    assert any("resources.request" in w for w in recorded)


async def test_unknown_field_under_strict_is_refused_and_nothing_is_stored(
    kubesim: KubeSim,
) -> None:
    body = _pod("strict")
    body["spec"]["containers"][0]["resources"] = {"request": {"cpu": "1"}}
    status, answer, _ = await _post(kubesim, body, "?fieldValidation=Strict")
    assert status == 400
    assert answer["kind"] == "Status"
    assert answer["reason"] == "BadRequest"
    assert 'unknown field "spec.containers[0].resources.request"' in answer["message"]
    assert (await _get_pod(kubesim, "strict"))[0] == 404


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"hostname": "Not_A_Host"}, "spec.hostname"),
        ({"subdomain": "-bad-"}, "spec.subdomain"),
        ({"restartPolicy": "Sometimes"}, "spec.restartPolicy"),
    ],
    ids=["hostname", "subdomain", "restart-policy"],
)
async def test_invalid_values_are_refused_with_422_naming_the_field(
    kubesim: KubeSim, spec: dict[str, Any], field: str
) -> None:
    status, answer, _ = await _post(kubesim, _pod("invalid", **spec))
    assert status == 422
    assert answer["reason"] == "Invalid"
    assert answer["message"].startswith('Pod "invalid" is invalid')
    assert field in [cause.get("field") for cause in answer["details"]["causes"]]
    assert (await _get_pod(kubesim, "invalid"))[0] == 404


async def test_wrongly_typed_field_is_refused_and_nothing_is_stored(kubesim: KubeSim) -> None:
    status, answer, _ = await _post(kubesim, _pod("typed", activeDeadlineSeconds="soon"))
    assert status == 400
    assert answer["kind"] == "Status"
    assert "activeDeadlineSeconds" in answer["message"]
    assert (await _get_pod(kubesim, "typed"))[0] == 404
