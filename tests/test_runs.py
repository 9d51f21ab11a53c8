"""Tests of bertlib.tiny.runs: run folders written, found and loaded; the Subject of claims."""

import json

import numpy as np
import pytest
import torch

from bertlib.tiny import agreement, linear_probe, runs
from bertlib.tiny import grammar as g
from bertlib.tiny import pretrain as pt


def _train_small(tok, seed):
    recipe = pt.Recipe(layers=1, heads=2, hidden=16, steps=6, batch_size=8, warmup=2, every=3,
                       seed=seed)
    check_set = agreement.make_sentence_set(tok, g.generate(3, seed=0, split="test"))
    model = pt.new_model(recipe.config(tok.get_vocab_size()), seed)
    control = linear_probe.control_labels(tok, check_set)
    return model, recipe, pt.train(model, tok, recipe, check_set, progress=False,
                                   number_probe=lambda m, p: linear_probe.verb_number_probe(m, p, control))


def test_a_saved_run_loads_back_equal(tok, tmp_path):
    model, recipe, history = _train_small(tok, 3)
    runs.save_run(tmp_path / "seed3", model, recipe, history)
    run = runs.load_run(tmp_path / "seed3")
    assert run.name == "seed3" and run.recipe == recipe
    runs.save_run(tmp_path / "run", model, recipe, history)  # a folder that names no seed
    assert runs.load_run(tmp_path / "run").name == "seed3"  # named by its recipe's seed
    assert np.array_equal(run.history["loss"], history.loss)
    assert run.history["heads/subject"].shape == run.history["heads/subject_far"].shape == (3, 1, 2)
    assert np.array_equal(run.history["number_probe"], history.number_probe, equal_nan=True)
    ids = torch.as_tensor(agreement.encode_texts(tok, ["the cat sleeps"])[0])
    with torch.no_grad():
        assert torch.allclose(run.model(input_ids=ids).logits, model(input_ids=ids).logits)


def test_one_folder_or_a_folder_of_runs_and_the_subject_is_not_the_committed_runs(tok, tmp_path,
                                                                                    monkeypatch):
    for seed in (5, 6):
        runs.save_run(tmp_path / f"seed{seed}", *_train_small(tok, seed))
    assert [p.name for p in runs.run_folders(tmp_path)] == ["seed5", "seed6"]
    assert [p.name for p in runs.run_folders(tmp_path / "seed6")] == ["seed6"]
    monkeypatch.setenv(runs.ENV, str(tmp_path / "seed5"))
    loaded, subject = runs.load_runs()
    assert [r.name for r in loaded] == ["seed5"] and not subject.is_reference
    with pytest.raises(FileNotFoundError, match="no training run in .*empty"):
        (tmp_path / "empty").mkdir()
        runs.run_folders(tmp_path / "empty")


def test_the_committed_runs_are_the_reference_of_claims(monkeypatch):
    monkeypatch.delenv(runs.ENV, raising=False)
    folders = runs.run_folders()
    assert len(folders) >= 5
    _, subject = runs.load_runs(folders[0].parent)
    assert subject.is_reference and subject.reference == f"{len(folders)} committed runs"


def test_a_history_only_record_keeps_the_final_table_and_no_model(tok, tmp_path):
    model, recipe, history = _train_small(tok, 3)
    final = runs.final_table(model, tok)
    assert final["final/rows"].shape == final["final/accuracy"].shape == (13,)
    runs.save_run(tmp_path / "seed3", model, recipe, history, final, with_model=False)
    assert not (tmp_path / "seed3" / "model.safetensors").exists()
    [(name, saved_recipe, saved)] = runs.load_histories(tmp_path)
    assert name == "seed3" and saved_recipe == recipe
    assert list(saved["final/rows"]) == list(final["final/rows"])
    trained = [k for k, row in enumerate(final["final/rows"])
               if row.split(" · ")[0] in recipe.constructions]
    assert runs.worst_trained_row(saved, recipe) == final["final/accuracy"][trained].min()
    with pytest.raises(ValueError, match="final/accuracy"):
        runs.worst_trained_row({"loss": history.loss}, recipe)
    with pytest.raises(FileNotFoundError, match="no training run"):
        runs.run_folders(tmp_path)  # a record, not a run


def test_seeds_tried_adds_a_readers_own_seed_of_the_same_recipe_once(tok, tmp_path):
    model, recipe, history = _train_small(tok, 3)
    runs.save_run(tmp_path / "kept" / "seed3", model, recipe, history, with_model=False)
    kept = [tmp_path / "kept"]
    mine = runs.Run("mine", pt.Recipe(**{**recipe.to_json(), "seed": 9}), model, {"loss": 0})
    again = runs.Run("again", recipe, model, {"loss": 1})  # seed 3 is already kept
    other = runs.Run("other", pt.Recipe(**{**recipe.to_json(), "seed": 8, "steps": 7}), model, {})
    tried = runs.seeds_tried([mine, again, other], kept)
    assert [name for name, _, _ in tried] == ["seed3", "mine"]
    assert [name for name, _, _ in runs.seeds_tried([other], kept)] == ["other"]  # its recipe
    with pytest.raises(ValueError, match="number of runs"):
        runs.seeds_tried([], kept)


def test_the_conflict_rows_counted_are_those_the_number_probe_scores(tok):
    check_set = runs.number_probe_set(tok)
    plural, nearest, _ = agreement.plural_of(check_set)
    n = runs.conflict_rows(check_set)
    assert 0 < n < len(plural) / 2
    # a feature that is the nearest noun's number: the conflict-rows column scores it 0 on n rows
    near = np.c_[nearest.astype(float), np.zeros(len(nearest))]
    scores = linear_probe.number_probe_controls(near, plural, nearest, np.zeros(len(plural), bool))
    assert scores[linear_probe.PROBE_COLUMNS.index("subject, conflict rows")] == 0
    assert n == int((plural != nearest)[int(round(len(plural) / 2)):].sum())


def test_a_run_saved_before_the_check_set_was_renamed_loads_the_same(tok, tmp_path):
    import json

    model, recipe, history = _train_small(tok, 5)
    folder = runs.save_run(tmp_path / "seed5", model, recipe, history)
    saved = json.loads((folder / "recipe.json").read_text())
    old = {{"check_sentences": "probe_sentences", "check_seed": "probe_seed"}.get(k, k): v
           for k, v in saved.items()}  # the names the check set's fields had before
    assert "probe_seed" in old and "check_seed" not in old
    (folder / "recipe.json").write_text(json.dumps(old))
    assert runs.load_run(folder).recipe == recipe


def test_runs_loaded_beside_copies_of_committed_ones_name_those(tmp_path):
    import shutil
    (tmp_path / "seed0").symlink_to(runs.COMMITTED / "seed0")
    shutil.copytree(runs.COMMITTED / "seed1", tmp_path / "seed1")
    shutil.copytree(runs.COMMITTED / "seed2", tmp_path / "seed9")  # another name: not a copy
    _, subject = runs.load_runs(tmp_path)
    assert not subject.is_reference
    assert "(seed0, seed1, seed9; seed0, seed1: the committed runs, the others not)" in subject.name


def test_run_folders_and_histories_sort_numbers_as_numbers(tmp_path):
    for k in (517, 93, 1357, 31):  # written in another order; read back seed31, 93, 517, 1357
        (tmp_path / f"seed{k}").mkdir()
        np.savez(tmp_path / f"seed{k}" / "history.npz", loss=np.zeros(1))
        (tmp_path / f"seed{k}" / "recipe.json").write_text(json.dumps(pt.Recipe(seed=k).to_json()))
        (tmp_path / f"seed{k}" / "model.safetensors").touch()  # what run_folders looks for
    assert [p.name for p in runs.run_folders(tmp_path)] == ["seed31", "seed93", "seed517", "seed1357"]
    assert [name for name, _, _ in runs.load_histories(tmp_path)] == [
        "seed31", "seed93", "seed517", "seed1357"]
