"""What a student types: the reference answers of an exercise, and a release notebook filled in.

Shared by the self-check, submission and browser tests. The answers come from the single
source, ``solutions/``: a solution cell without its ``### BEGIN/END SOLUTION`` marker lines.
"""

from __future__ import annotations

import copy

import nbformat

from autograder.course import EXERCISES, SOLUTIONS


def _grade_id(cell):
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def reference_answers(assignment: str, notebook: str) -> dict:
    """``{grade_id: source}`` of every answer cell, as the instructor's solution writes it."""
    nb = nbformat.read(SOLUTIONS / assignment / f"{notebook}.ipynb", as_version=4)
    return {
        _grade_id(c): "\n".join(
            line
            for line in c.source.splitlines()
            if line.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION")
        )
        for c in nb.cells
        if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")
    }


def filled_release(assignment: str, notebook: str, answers: dict):
    """The release notebook with the answer cells named in ``answers`` replaced."""
    nb = copy.deepcopy(nbformat.read(EXERCISES / assignment / f"{notebook}.ipynb", as_version=4))
    for cell in nb.cells:
        if _grade_id(cell) in answers:
            cell.source = answers[_grade_id(cell)]
    return nb


def with_body(reference: str, body: str) -> str:
    """An answer cell: the reference's signature and docstring (its first two lines), then
    ``body`` (the function's indented body)."""
    head = "\n".join(reference.splitlines()[:2])
    return f"{head}\n{body.strip(chr(10))}\n"


# A correct GAN step another way, typed into exercise 4 (gan_step) and exercise 5 (fixed_step_1):
# every .grad set to None at the top, D's two losses backward one at a time (they add up in .grad).
ZERO_AT_TOP_TWO_BACKWARDS = """    for p in [*G.parameters(), *D.parameters()]:
        p.grad = None
    fake = G(z)
    d_real = D(real)
    loss_real = F.binary_cross_entropy_with_logits(d_real, torch.ones(d_real.shape))   # float32 targets
    loss_real.backward()
    d_fake = D(fake.detach())
    loss_fake = F.binary_cross_entropy_with_logits(d_fake, torch.zeros(d_fake.shape))
    loss_fake.backward()
    opt_D.step()
    d_gen = D(fake)
    loss_G = F.binary_cross_entropy_with_logits(d_gen, torch.ones_like(d_gen))
    loss_G.backward()
    opt_G.step()
    return (loss_real + loss_fake).item(), loss_G.item()
"""


def write_fixtures(here, assignment: str, notebook: str, cases: dict) -> None:
    """Write ``here/<case>.ipynb`` for each ``{case: answers}``: the release notebook with the
    reference answers, ``answers`` (``{grade_id: source}``) replacing some; old ones removed."""
    reference = reference_answers(assignment, notebook)
    for old in here.glob("*.ipynb"):
        old.unlink()
    for case, answers in cases.items():
        nb = filled_release(assignment, notebook, {**reference, **answers})
        nbformat.write(nb, here / f"{case}.ipynb")
    print(f"wrote {len(cases)} fixture notebooks to {here}")
