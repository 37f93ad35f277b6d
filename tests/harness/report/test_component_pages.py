"""The page of each method, control and metric: facts, engines, parameters, failures, scores; hostile text inert."""

from __future__ import annotations

from pathlib import Path

from markupsafe import Markup
from report_fixture import HOSTILE, build_results
from test_site import norm, parse

from openpert.report.component_pages import render_method_page, render_metric_page
from openpert.report.paths import TaskPaths
from openpert.report.task_results import TaskResults


def _doc(tmp_path: Path, html: str):
    page = tmp_path / "page.html"
    page.write_text(html)
    return parse(page)


def _results() -> TaskResults:
    data = build_results()
    mlp = next(m for m in data["methods"] if m["id"] == "mlp")
    mlp["engines"] = [
        {"type": "docker", "image": f"img{HOSTILE}",
         "setup": [{"type": "python", "packages": ["numpy", f"evil{HOSTILE}"]}, f"echo {HOSTILE}"],
         "network": {"mode": HOSTILE}},
        {"type": "native"},
        f"plain{HOSTILE}",
    ]
    mlp["parameters"] = {f"k{HOSTILE}": [1, 2]}
    mlp["links"] = {"repository": "javascript:alert(1)", "documentation": "https://example.org/mlp"}
    mlp["references"] = {"bibtex": ["@article{key1, title={" + HOSTILE + "}}"]}
    mlp["description"] = f"A *multilayer* perceptron {HOSTILE}"
    return TaskResults(data, Path("."))


def test_method_page_shows_its_engines_parameters_and_links_escaped(tmp_path: Path) -> None:
    results = _results()
    method = results.method("mlp")
    html = render_method_page(results, TaskPaths(results, "perturbqa"), method)
    assert isinstance(html, Markup) and HOSTILE not in html and 'href="javascript:' not in html
    doc = _doc(tmp_path, html)
    assert norm(doc.find("h1").text()) == "MLP" and norm(doc.find("p", class_="eyebrow").text()) == "Method"
    sections = [s.attrs["id"] for s in doc.find("main").find_all("section")]
    assert sections == ["about", "scores", "parameters", "environment", "resources", "failures"]
    engines = doc.find("ul", class_="engines").find_all("li", class_="engine")
    docker, native = engines
    assert norm(docker.find("h3").text()) == "docker"
    assert norm(docker.find("code", class_="image").text()) == f"img{HOSTILE}"
    steps = docker.find("ul", class_="setup").find_all("li")
    assert norm(steps[0].text()) == f"python packages: numpy, evil{HOSTILE}"
    assert norm(steps[1].text()) == f"echo {HOSTILE}"
    assert [norm(t.text()) for t in docker.find_all("dt")] == ["Image", "Setup", "network"]
    assert norm(native.find("p", class_="empty").text()) == "Runs in the current environment."
    assert norm(doc.find("ul", class_="engines").find_all("li")[-1].text()) == f"plain{HOSTILE}"
    params = doc.find("table", id="table-parameters")
    assert [norm(c.text()) for c in params.find("tbody").find("tr").elements()] == [f"k{HOSTILE}", "[1, 2]"]
    about = doc.find("section", id="about")
    assert norm(about.find("em").text()) == "multilayer" and HOSTILE in norm(about.text())
    links = about.find("dl", class_="links")
    assert [a.attrs["href"] for a in links.find_all("a")] == ["https://example.org/mlp"]
    assert "javascript:alert(1)" in norm(links.text())  # shown as text, not a link
    assert norm(about.find("summary").text()) == "BibTeX: key1"


def test_failures_name_the_job_and_the_schedulers_reason(tmp_path: Path) -> None:
    results = _results()
    method = results.method("big_llm")
    doc = _doc(tmp_path, render_method_page(results, TaskPaths(results, "perturbqa"), method))
    failure = doc.find("ul", class_="failure-list").find("li")
    assert "on K562 essential:" in norm(failure.text())
    assert norm(failure.find("span", class_="muted").text()).startswith("(memory limit exceeded")
    assert norm(failure.find("strong").text())  # what went wrong, in words


def test_metric_page_leaves_out_what_the_schema_does_not_record(tmp_path: Path) -> None:
    results = _results()
    paths = TaskPaths(results, "perturbqa")
    metric = dict(results.metric("brier"), description=HOSTILE)
    html = render_metric_page(results, paths, metric)
    assert HOSTILE not in html
    doc = _doc(tmp_path, html)
    sections = [s.attrs["id"] for s in doc.find("main").find_all("section")]
    assert sections == ["about", "scores", "resources", "failures"]
    facts = dict(zip([norm(t.text()) for t in doc.find_all("dt")], [norm(d.text()) for d in doc.find_all("dd")]))
    assert facts["Direction"] == "↓ lower is better" and facts["Id"] == "brier"
    scores = doc.find("table", id="table-scores")
    links = [a.attrs["href"] for a in scores.find_all("a")]
    assert links and all(h.startswith("../") and h.endswith(".html") for h in links)
    assert scores.find_all("span", class_="badge")  # controls carry their kind
    with_parameters = _doc(tmp_path, render_metric_page(results, paths, dict(metric, parameters={}, engines=[])))
    assert norm(with_parameters.find("section", id="parameters").text()).endswith("(no parameters recorded).")
    assert norm(with_parameters.find("section", id="environment").text()).endswith("No engine recorded.")


def test_a_control_kind_from_the_file_becomes_a_safe_class(tmp_path: Path) -> None:
    results = _results()
    control = dict(results.method("ground_truth"), control='positive" onclick="x')
    doc = _doc(tmp_path, render_method_page(results, TaskPaths(results, "perturbqa"), control))
    kind = doc.find("main").find("span", class_="badge")
    assert kind.attrs["class"] == "badge badge-positive--onclick--x"
    assert "onclick" not in kind.attrs
