"""autograder.lessons counts what a reader reads: prose, text outputs, code lines and a pause
per "predict, then run" prompt; optional sections and the second-language summary apart."""

import nbformat
import pytest

from autograder.lessons import (
    CODE_LINES_PER_MINUTE,
    FIGURE_MINUTES,
    PREDICT_MINUTES,
    WORDS_PER_MINUTE,
    measure,
)


def _lesson(tmp_path, cells):
    nb = nbformat.v4.new_notebook(cells=cells)
    path = tmp_path / "01_x.ipynb"
    nbformat.write(nb, path)
    return path


def _code(source, outputs):
    cell = nbformat.v4.new_code_cell(source)
    cell.outputs = outputs
    return cell


def test_prose_outputs_code_and_prompts_count_optional_and_chinese_do_not(tmp_path):
    out = nbformat.v4.new_output
    path = _lesson(
        tmp_path,
        [
            nbformat.v4.new_markdown_cell("# Lesson\n\none two three. **Predict, then run:** four"),
            _code(
                "# a comment\nx = 1\n\nprint(x)",
                [
                    out("stream", name="stdout", text="five six\n"),
                    out("execute_result", data={"text/plain": "seven"}, execution_count=1),
                    out("display_data", data={"image/png": "AAAA", "text/plain": "<Figure>"}),
                    out(
                        "error",
                        ename="RuntimeError",
                        evalue="eight nine",
                        traceback=["Traceback line", "\x1b[31mRuntimeError\x1b[0m: eight nine"],
                    ),
                ],
            ),
            nbformat.v4.new_markdown_cell("## Deep dive (optional)\n\nten eleven predict"),
            _code("y = 2", [out("stream", name="stdout", text="twelve\n")]),
            nbformat.v4.new_markdown_cell("## Summary\n\nthirteen\n\n### 小结（中文）\n\n十四"),
        ],
    )
    t = measure(path)
    # core prose: 9 + "## Summary thirteen"; outputs: "five six seven RuntimeError: eight nine"
    assert (t.core.words, t.core.output_words, t.core.code_lines, t.core.prompts) == (12, 6, 2, 1)
    assert (t.optional.words, t.optional.output_words, t.optional.code_lines) == (10, 1, 1)
    assert t.optional.prompts == 1
    assert t.core.figures == 1  # the display_data with an image/png
    assert t.minutes == pytest.approx(
        (12 + 6) / WORDS_PER_MINUTE + 2 / CODE_LINES_PER_MINUTE + PREDICT_MINUTES + FIGURE_MINUTES
    )
    assert (WORDS_PER_MINUTE, CODE_LINES_PER_MINUTE, PREDICT_MINUTES, FIGURE_MINUTES) == (
        110,
        6,
        1.5,
        1.0,
    )  # the rates the start page states


def test_figure_code_and_exercise_tests_are_run_not_studied(tmp_path):
    """The drawing code of a cell tagged ``figure`` and an exercise's test cells (nbgrader grade
    cells without a solution) count no code lines; their figure and messages still count, and
    an answer cell (grade and solution) counts its lines."""
    out = nbformat.v4.new_output
    figure = _code(
        "import matplotlib\nplot()\nsave()", [out("display_data", data={"image/png": "AA"})]
    )
    figure.metadata["tags"] = ["figure"]
    test = _code(
        "assert f(1) == 2\nassert f(2) == 3", [out("stream", name="stdout", text="ok ok\n")]
    )
    test.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "t", "points": 1}
    answer = _code("def f(x):\n    return x + 1", [])
    answer.metadata["nbgrader"] = {"grade": True, "solution": True, "grade_id": "a", "points": 1}
    t = measure(_lesson(tmp_path, [figure, test, answer]))
    assert (t.core.code_lines, t.core.figures, t.core.output_words) == (2, 1, 2)
