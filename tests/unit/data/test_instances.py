"""SOP / NSP instances: the original's pairing, against a literal re-implementation, and its corner cases."""

from __future__ import annotations

import random

import numpy as np
import pytest

from albert_lm.data.instances import (
    FLAG_LABEL,
    FLAG_RANDOM_B,
    FLAG_SHORT,
    DocumentIndex,
    InstanceConfig,
    create_instances_from_document,
    derive_rng,
    instance_token_ids,
    truncate_pair_randomly,
)


def reference_instances(all_documents, document_index, cfg: InstanceConfig, rng):
    """create_instances_from_document on lists of token lists, structured as the original (lists that are
    extended, `del tokens[0]` / `pop()` truncation, sentences put back by decrementing i). Our one change,
    short_seq_scope="instance", redraws the target after each instance."""
    document = all_documents[document_index]
    max_num_tokens = cfg.max_seq_length - 3
    nsp = cfg.task == "nsp"

    def target():
        if rng.random() < cfg.short_seq_prob:
            return rng.randint(2, max_num_tokens)
        return max_num_tokens

    target_seq_length = target()
    instances = []
    current_chunk, current_length = [], 0
    i = 0
    while i < len(document):
        segment = document[i]
        current_chunk.append(segment)
        current_length += len(segment)
        if i == len(document) - 1 or current_length >= target_seq_length:
            a_end = 1
            if len(current_chunk) >= 2:
                a_end = rng.randint(1, len(current_chunk) - 1)
            tokens_a = []
            for j in range(a_end):
                tokens_a.extend(current_chunk[j])
            tokens_b = []
            if len(current_chunk) == 1 or (nsp and rng.random() < 0.5):
                is_random_next = True
                target_b_length = target_seq_length - len(tokens_a)
                for _ in range(10):
                    random_document_index = rng.randint(0, len(all_documents) - 1)
                    if random_document_index != document_index:
                        break
                random_document = all_documents[random_document_index]
                random_start = rng.randint(0, len(random_document) - 1)
                for j in range(random_start, len(random_document)):
                    tokens_b.extend(random_document[j])
                    if len(tokens_b) >= target_b_length:
                        break
                i -= len(current_chunk) - a_end
            elif not nsp and rng.random() < 0.5:
                is_random_next = True
                for j in range(a_end, len(current_chunk)):
                    tokens_b.extend(current_chunk[j])
                tokens_a, tokens_b = tokens_b, tokens_a
            else:
                is_random_next = False
                for j in range(a_end, len(current_chunk)):
                    tokens_b.extend(current_chunk[j])
            while len(tokens_a) + len(tokens_b) > max_num_tokens:
                trunc = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
                if rng.random() < 0.5:
                    del trunc[0]
                else:
                    trunc.pop()
            instances.append((tokens_a, tokens_b, is_random_next))
            current_chunk, current_length = [], 0
            if cfg.short_seq_scope == "instance":
                target_seq_length = target()
        i += 1
    return instances


def make_corpus(gen: random.Random, n_docs: int, max_sents: int = 30, max_len: int = 60):
    docs, tokens, sent_off, doc_off = [], [], [0], [0]
    next_id = 10
    for _ in range(n_docs):
        doc = []
        for _ in range(gen.randint(1, max_sents)):
            n = gen.randint(1, max_len)
            sent = list(range(next_id, next_id + n))  # unique ids: every token says where it came from
            next_id += n
            doc.append(sent)
            tokens.extend(sent)
            sent_off.append(len(tokens))
        docs.append(doc)
        doc_off.append(len(sent_off) - 1)
    index = DocumentIndex(np.array(sent_off, np.int64), np.array(doc_off, np.int64))
    return docs, np.array(tokens, np.int64), index


@pytest.mark.parametrize(
    "cfg",
    [
        InstanceConfig(max_seq_length=128),
        InstanceConfig(max_seq_length=64, short_seq_scope="document"),
        InstanceConfig(max_seq_length=128, task="nsp"),
        InstanceConfig(max_seq_length=40, short_seq_prob=0.5, task="nsp", short_seq_scope="document"),
        InstanceConfig(max_seq_length=512),
    ],
)
def test_matches_the_original_structure(cfg: InstanceConfig) -> None:
    docs, tokens, index = make_corpus(random.Random(1), 40)
    for d in range(len(docs)):
        ours = create_instances_from_document(index, d, cfg, random.Random(d))
        ref = reference_instances(docs, d, cfg, random.Random(d))
        assert len(ours) == len(ref)
        for rec, (a, b, is_random) in zip(ours, ref):
            ids, len_a = instance_token_ids(tokens, rec, 0, 1)
            assert ids[1 : len_a - 1].tolist() == a
            assert ids[len_a:-1].tolist() == b
            assert bool(rec[5] & FLAG_LABEL) == is_random
            assert len(ids) <= cfg.max_seq_length


def test_one_sentence_document_takes_b_from_another_document() -> None:
    # the original's handling of a chunk with a single segment: B from a random other document, label 1
    docs, tokens, index = make_corpus(random.Random(2), 10)
    single = [[1000 + i for i in range(20)]]
    docs.insert(0, single)
    sent_off = np.concatenate([[0, 20], index.sent_offsets[1:] + 20])
    doc_off = np.concatenate([[0, 1], index.doc_offsets[1:] + 1])
    tokens = np.concatenate([np.arange(1000, 1020), tokens])
    index = DocumentIndex(sent_off, doc_off)
    for seed in range(20):
        recs = create_instances_from_document(
            index, 0, InstanceConfig(max_seq_length=128), random.Random(seed)
        )
        assert len(recs) == 1
        a_start, b_start, a_len, b_len, doc, flags = recs[0]
        assert flags & FLAG_LABEL and flags & FLAG_RANDOM_B
        assert (a_start, a_len) == (0, 20)
        assert b_start >= 20  # from another document


def test_document_longer_than_the_budget() -> None:
    # one sentence of 1000 tokens, another of 5: truncated to max_num_tokens, the longer side trimmed
    sent_off = np.array([0, 1000, 1005, 1010], np.int64)
    index = DocumentIndex(sent_off, np.array([0, 2, 3], np.int64))
    tokens = np.arange(1010)
    cfg = InstanceConfig(max_seq_length=64, short_seq_prob=0.0)
    recs = create_instances_from_document(index, 0, cfg, random.Random(0))
    # the 1000-token sentence is a chunk by itself (B from the other document), then the last sentence is
    ids, _ = instance_token_ids(tokens, recs[0], -1, -2)
    assert len(ids) == 64  # exactly max_seq_length: the long side was cut down to fit
    assert recs[0][2] == 61 - 5 and recs[0][3] == 5
    assert len(recs) == 2 and recs[1][2] == 5


def test_truncate_pair_randomly() -> None:
    rng = random.Random(0)
    fronts = 0
    for _ in range(200):
        a0, al, b0, bl = truncate_pair_randomly(100, 50, 0, 10, 40, rng)
        assert al + bl == 40 and bl == 10  # only the longer side (A) is cut
        assert a0 >= 100 and a0 + al <= 150  # a contiguous piece of the original span
        fronts += a0 - 100
    # each removal is from the front with p = 0.5: 20 removals per call
    assert abs(fronts / (200 * 20) - 0.5) < 0.05
    assert truncate_pair_randomly(0, 5, 10, 5, 9, random.Random(1))[1:4:2] == (5, 4)  # ties cut B


def test_sop_labels_and_segment_order() -> None:
    docs, tokens, index = make_corpus(random.Random(3), 150)
    cfg = InstanceConfig(max_seq_length=128)
    labels, swapped_ok = [], 0
    for d in range(len(docs)):
        for r in create_instances_from_document(index, d, cfg, derive_rng(1, d)):
            a_start, b_start, a_len, b_len, doc, flags = r
            if flags & FLAG_RANDOM_B:
                continue
            labels.append(flags & FLAG_LABEL)
            # same document, adjacent spans (up to truncation); swapped means B comes first in the text
            if flags & FLAG_LABEL:
                assert b_start < a_start
            else:
                assert a_start < b_start
            swapped_ok += 1
    assert swapped_ok > 400
    assert abs(np.mean(labels) - 0.5) < 0.06


def test_short_sequence_fraction() -> None:
    docs, tokens, index = make_corpus(random.Random(4), 200)
    for scope in ("instance", "document"):
        cfg = InstanceConfig(max_seq_length=128, short_seq_scope=scope)
        flags = []
        for d in range(len(docs)):
            recs = create_instances_from_document(index, d, cfg, derive_rng(2, d))
            f = [bool(r[5] & FLAG_SHORT) for r in recs]
            if scope == "document":
                assert len(set(f)) <= 1  # one draw per document, as the original
            flags += f
        if scope == "instance":
            assert abs(np.mean(flags) - 0.1) < 0.03  # one draw per instance: 10% of instances


def test_nsp_negatives_come_from_other_documents() -> None:
    docs, tokens, index = make_corpus(random.Random(5), 30)
    cfg = InstanceConfig(max_seq_length=128, task="nsp")
    labels = []
    for d in range(len(docs)):
        lo, hi = index.sent_offsets[index.doc_offsets[d]], index.sent_offsets[index.doc_offsets[d + 1]]
        for r in create_instances_from_document(index, d, cfg, derive_rng(3, d)):
            labels.append(r[5] & FLAG_LABEL)
            in_doc = lo <= r[1] < hi
            assert in_doc != bool(r[5] & FLAG_LABEL)  # label 1 <=> B from another document
    assert 0.4 < np.mean(labels) < 0.7


def test_derive_rng_is_stable() -> None:
    # seeded from (seed, document, dupe), the same on every machine and Python version
    assert derive_rng(12345, 0, 7, 0).random() == derive_rng(12345, 0, 7, 0).random()
    assert derive_rng(12345, 0, 7, 0).random() != derive_rng(12345, 0, 7, 1).random()


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="max_seq_length"):
        InstanceConfig(max_seq_length=4)
    with pytest.raises(ValueError, match="short_seq_scope"):
        InstanceConfig(short_seq_scope="corpus")  # type: ignore[arg-type]
