"""Follow-ups of the session's audits (25): small command-line consistencies."""

from __future__ import annotations

from console import run_main


def test_contextuality_top_k_under_one_is_a_range_error_as_every_other_top_k() -> None:
    # exit 2 (docs/errors.md: a value outside its range), before the corpus is read
    ran = run_main("contextuality", "-i", "no-such-file.txt", "-k", "0")
    assert ran.code == 2, (ran.code, ran.stderr)
    assert "--top-k" in ran.stderr and "1" in ran.stderr


def test_a_flag_value_with_a_space_stays_quoted_in_a_message() -> None:
    from bertscope.cli.wording import as_flags

    # a message naming a prompt on the command line: the space of 'query: ' was lost unquoted
    said = as_flags("this pca was fitted on prompt='', not prompt='query: '")
    assert said == "this pca was fitted on --prompt \"\", not --prompt 'query: '"
    assert as_flags("give pooling='mean'") == "give --pooling mean"  # a plain value stays bare


def test_a_value_with_an_apostrophe_or_in_a_settings_dict_reads_as_a_shell_word() -> None:
    from bertscope.cli.wording import as_flags

    said = as_flags('fitted on prompt="Represent the user\'s query: "')
    assert said == 'fitted on --prompt "Represent the user\'s query: "'  # not '...user'"'"'s...'
    assert as_flags("made with {'prompt': 'query: ', 'pooling': 'mean'}") == (
        "made with --prompt 'query: ' --pooling mean"
    )


def test_both_prompt_keywords_are_named_as_flags_on_the_command_line(tmp_path) -> None:
    texts = tmp_path / "t.txt"
    texts.write_text("a cat\nthe dog\n")
    ran = run_main("embed", "-i", str(texts), "--prompt-name", "query", "--prompt", "x: ")
    assert ran.code != 0
    assert "give --prompt-name or --prompt, not both (--prompt is the text itself)" in ran.stderr, ran.stderr


def test_chunks_embedded_alone_drop_a_groups_prepared_pieces_before_the_next(bundled, monkeypatch) -> None:
    # Review of fa7fd3f: one group's prepared Tokens (~110 MB for 4,096 chunks of 122 tokens) stayed
    # bound across the yield, so two groups' were alive as the next group was prepared.
    import weakref

    import bertscope.chunk_embed as chunk_embed
    from bertscope.chunk_embed import plan_chunks

    engine = bundled.engine
    monkeypatch.setattr(engine, "chunk_size", 4)
    made: list[weakref.ref] = []
    alive_at_prepare: list[int] = []
    real = engine.prepare

    def prepare(texts, spec, **kwargs):
        alive_at_prepare.append(sum(ref() is not None for ref in made))
        fitted = real(texts, spec, **kwargs)
        made.extend(weakref.ref(tokens) for tokens in fitted)
        return fitted

    monkeypatch.setattr(engine, "prepare", prepare)
    doc = "The cat sat on the mat. " * 40
    plan = plan_chunks(bundled, doc, late=False, chunks="tokens", chunk_size=12, chunk_overlap=0)
    (result,) = chunk_embed.iter_chunk_embeddings(
        engine, zip(plan.docs, plan.spans, strict=True), plan.spec, late=False, settings={}
    )
    assert len(result.chunks) > 8 and len(alive_at_prepare) >= 3
    assert alive_at_prepare == [0] * len(alive_at_prepare), alive_at_prepare


def test_chunk_vectors_are_post_processed_without_the_posts_finite_check(tiny_dirs, tmp_path, monkeypatch):
    # As the sentence recipe does (apply_post): a non-finite chunk vector is named by the store or the
    # library's own check with its fix, not by the post's "needs finite vectors".
    import bertscope
    from bertscope.core.post import PostProcessor, fit_post_on_texts

    model = bertscope.load(tiny_dirs["bert"], device="cpu")
    texts = ["a cat sat on the mat", "the dog ran far away", "bread is good to eat", "rain fell all day"]
    post = fit_post_on_texts(model, texts, "pca", dim=2).save(tmp_path / "p.safetensors")
    asked: list[bool] = []
    real = PostProcessor.apply

    def apply(self, vectors, *, check_finite=True):
        asked.append(check_finite)
        return real(self, vectors, check_finite=check_finite)

    monkeypatch.setattr(PostProcessor, "apply", apply)
    model.embed_chunks("A cat sat. A dog ran.", post=str(post))
    corpus = tmp_path / "docs.txt"
    corpus.write_text("A cat sat. A dog ran.\nBread is good. Rain fell.\n")
    out = tmp_path / "c.parquet"
    ran = run_main("embed", "-i", str(corpus), "-o", str(out), "-m", str(tiny_dirs["bert"]), "--chunks",
                   "sentence", "--post", str(post), "-q")  # fmt: skip
    assert ran.code == 0, ran.stderr
    assert len(asked) >= 2 and not any(asked), asked


def test_an_attention_graph_made_again_that_fails_to_open_for_a_passing_reason_is_not_reinstall(
    tiny_dirs, monkeypatch, capsys
) -> None:
    # The attention graph's second open (after a refused one was made again): a file limit of this
    # process said "reinstall it: pip install --force-reinstall"; it is open_failure's line, graph kept.
    import onnxruntime as ort

    import bertscope
    import bertscope.backends.onnx as onnx_backend

    fail = ort.capi.onnxruntime_pybind11_state.Fail
    bertscope.load(tiny_dirs["bert"], device="cpu", backend="onnxruntime")
    model = bertscope.load(tiny_dirs["bert"], device="cpu", backend="onnxruntime")
    errors = iter([fail("Opset 99 is under development"), fail("failed:system error number 24")])
    real, real_export = onnx_backend.open_session, onnx_backend.export_onnx
    exporting = [False]

    def export_onnx(*args, **kwargs):
        exporting[0] = True  # the export's own check of the graph it wrote opens it: not failed here
        try:
            return real_export(*args, **kwargs)
        finally:
            exporting[0] = False

    def open_session(path, *args, **kwargs):
        if not exporting[0] and "attentions" in str(path):  # the attention graph's opens once exported
            error = next(errors, None)
            if error is not None:
                raise error
        return real(path, *args, **kwargs)

    monkeypatch.setattr(onnx_backend, "export_onnx", export_onnx)
    monkeypatch.setattr(onnx_backend, "open_session", open_session)
    try:
        model.attentions("a small cat")
        said = capsys.readouterr().err
    except bertscope.BertscopeError as exc:
        said = str(exc)
    assert "system error number 24" in said and "Too many open files" in said, said
    assert "force-reinstall" not in said, said


def test_an_sqlite_job_inside_a_transaction_is_not_taken_as_alone(tmp_path) -> None:
    # Review of 3961510: PRAGMA journal_mode = DELETE answers 'wal' without raising inside a transaction,
    # which _alone took as "no other connection": abandon could then remove a file another job holds.
    import sqlite3
    import types

    from bertscope.io.sqlite_store import SqliteSink

    db = sqlite3.connect(tmp_path / "s.db", isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("CREATE TABLE t (x)")
    db.execute("BEGIN")
    db.execute("INSERT INTO t VALUES (1)")
    assert SqliteSink._alone(types.SimpleNamespace(db=db)) is False  # type: ignore[arg-type]
    db.execute("COMMIT")
    assert SqliteSink._alone(types.SimpleNamespace(db=db)) is True  # type: ignore[arg-type]
    db.close()
