"""Data-flow pictures drawn by code: boxes with labels and shapes, joined by arrows.

A notebook shows the picture of a mechanism before its first matrix product. Each picture is a
small function below that places boxes on a grid of plain coordinates (x to the right, y up) and
returns the matplotlib Figure, so the picture is drawn, not pasted, and stays true to the code.

    fig, ax = canvas(8, 4, title="...")
    box(ax, (1, 2), "X\\n(n, d)")
    box(ax, (4, 2), "Q = X W_Q\\n(n, d_k)", colour="query")
    arrow(ax, (1.6, 2), (3.3, 2), "W_Q")
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Patch, Rectangle

from bertlib.checks import as_array, bool_mask, has_shape, heads_dividing, number, whole
from bertlib.paper.attention import attention_scale, scaled_dot_product_attention

__all__ = ["COLOURS", "canvas", "box", "arrow", "rnn_vs_attention", "qkv_scores_flow",
           "one_query_flow", "hatch_masked", "multi_head_flow", "tiled_softmax_picture",
           "encoder_layer_picture", "embeddings_and_stack_picture", "pretraining_step_picture"]

#: One colour per role, the same in every picture of the series.
COLOURS = {
    "input": "#e8eef7",
    "query": "#fde2c8",
    "key": "#d7ecd9",
    "value": "#e5dcf2",
    "scores": "#fff3b0",
    "weights": "#ffd6d6",
    "output": "#d9eef5",
    "op": "#f2f2f2",
}


def canvas(width: float, height: float, title: str | None = None, scale: float = 1.0):
    """A blank picture ``width`` × ``height`` units (1 unit = ``scale`` inch); returns (fig, ax)."""
    number(width, "width", 0, open_low=True)
    number(height, "height", 0, open_low=True)
    fig, ax = plt.subplots(figsize=(width * scale, height * scale))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_aspect("equal")
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize=11)
    return fig, ax


def box(ax, centre: tuple[float, float], text: str, colour: str = "op", width: float = 1.2,
        height: float = 0.8, fontsize: float = 9):
    """A rounded box centred at ``centre`` with ``text`` (role name from COLOURS or any colour)."""
    x, y = centre
    face = COLOURS.get(colour, colour)
    ax.add_patch(FancyBboxPatch((x - width / 2, y - height / 2), width, height,
                                boxstyle="round,pad=0.02,rounding_size=0.08",
                                facecolor=face, edgecolor="#444444", linewidth=1))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize)


def arrow(ax, start: tuple[float, float], end: tuple[float, float], text: str | None = None,
          fontsize: float = 8, offset: tuple[float, float] = (0.0, 0.15)):
    """An arrow from ``start`` to ``end``, with an optional label at its middle, ``offset`` away."""
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12,
                                 color="#333333", linewidth=1, shrinkA=0, shrinkB=0))
    if text:
        mx = (start[0] + end[0]) / 2 + offset[0]
        my = (start[1] + end[1]) / 2 + offset[1]
        ax.text(mx, my, text, ha="center", va="bottom", fontsize=fontsize, color="#333333")


# --- notebook 01 ---

def rnn_vs_attention(tokens: list[str], target: int | None = None):
    """Two routes for information from the first word to word ``target`` (default: the last).

    Top: a recurrent network, one state s_t per word, each computed from s_{t−1}: the first
    word reaches word t only through t steps. Bottom: attention, word ``target`` looks every word
    up directly, one step each. tokens: the n ≥ 2 words. Returns the Figure.
    """
    n = whole(len(tokens), "the number of tokens", low=2)
    target = n - 1 if target is None else whole(target, "target", 1, n - 1, why="(a position)")
    step = 1.45
    fig, ax = canvas(step * n + 0.6, 5.2, title="Getting the first word to "
                     f"{tokens[target]!r}: a chain of steps, or one look-up")
    xs = [0.3 + step * (k + 0.5) for k in range(n)]
    ax.text(0.1, 4.85, f"recurrent network: {target} steps, one after another",
            fontsize=9, ha="left")
    for k, (x, t) in enumerate(zip(xs, tokens, strict=True)):
        box(ax, (x, 3.1), t, "input", width=1.0, height=0.5)
        box(ax, (x, 4.1), f"s{k}", "op", width=0.8, height=0.5)
        arrow(ax, (x, 3.35), (x, 3.85))
        if k:
            arrow(ax, (xs[k - 1] + 0.4, 4.1), (x - 0.4, 4.1))
    ax.text(0.1, 2.3, f"attention: {tokens[target]!r} reads every word directly, 1 step each",
            fontsize=9, ha="left")
    for x, t in zip(xs, tokens, strict=True):
        box(ax, (x, 0.55), t, "key", width=1.0, height=0.5)
    box(ax, (xs[target], 1.75), f"new {tokens[target]}", "output", width=1.1, height=0.5)
    for x in xs:
        arrow(ax, (x, 0.8), (xs[target], 1.5))
    return fig


def qkv_scores_flow(n: int, d: int, d_k: int):
    """Data flow of one attention head, every box labelled with its shape.

    X (n, d) is projected by W_Q, W_K, W_V (d, d_k) into Q, K, V (n, d_k); S = Q Kᵀ is the (n, n)
    score matrix, one row per query and one column per key; a softmax of each row of S / √d_k
    gives the attention A (n, n); Z = A V (n, d_k). Returns the Figure.
    """
    for name, v in (("n", n), ("d", d), ("d_k", d_k)):
        whole(v, name, low=1)
    fig, ax = canvas(11.5, 4.6, title="One attention head: projections, the n × n scores, "
                     "the weighted sum")
    box(ax, (0.9, 2.3), f"X\n({n}, {d})", "input", width=1.2)
    rows = {"Q": ("query", 3.8), "K": ("key", 2.3), "V": ("value", 0.8)}
    for name, (role, y) in rows.items():
        box(ax, (3.4, y), f"{name} = X W_{name}\n({n}, {d_k})", role, width=1.7)
        arrow(ax, (1.5, 2.3 + (y - 2.3) / 6), (2.55, y))
    # the three arrows leave X from three points: labels sit beside them, never across a line
    ax.text(1.85, 3.15, f"W_Q ({d}, {d_k})", ha="right", va="bottom", fontsize=8)
    ax.text(2.05, 2.36, f"W_K ({d}, {d_k})", ha="center", va="bottom", fontsize=8)
    ax.text(1.85, 1.45, f"W_V ({d}, {d_k})", ha="right", va="top", fontsize=8)
    box(ax, (6.1, 3.05), f"S = Q Kᵀ\n({n}, {n})", "scores", width=1.9)
    arrow(ax, (4.25, 3.8), (5.15, 3.2))
    arrow(ax, (4.25, 2.3), (5.15, 2.9), "Kᵀ", offset=(0.2, -0.3))
    box(ax, (8.5, 3.05), f"A = softmax(S / √d_k)\nper row ({n}, {n})", "weights", width=2.0)
    arrow(ax, (7.05, 3.05), (7.5, 3.05))
    box(ax, (10.5, 1.9), f"Z = A V\n({n}, {d_k})", "output", width=1.4)
    arrow(ax, (9.5, 3.05), (10.2, 2.3))
    arrow(ax, (4.25, 0.8), (9.8, 1.75), "V", offset=(0.0, -0.3))
    return fig


def one_query_flow(tokens: list[str], Q, K, V, query: int):
    """One query worked through, number by number (as in Alammar's Illustrated Transformer).

    One row per key j: its word, the score q·k_j, the score ÷ √d_k, the softmax weight w_j, and
    w_j v_j; the bottom row sums them to z = Σ_j w_j v_j. Q, K: (n, d_k), V: (n, d_v) numpy
    arrays; query: the row of Q worked through (0..n−1). Returns the Figure.
    """
    n = whole(len(tokens), "the number of tokens", low=1)
    whole(query, "query", 0, n - 1, why="(a token index)")
    why = f"for {n} tokens"
    Q = as_array(Q, "Q", shape=(n, None), layout="(n, d_k)", why=why)
    K = as_array(K, "K", shape=Q.shape, layout="(n, d_k)", why=why)
    V = as_array(V, "V", shape=(n, None), layout="(n, d_v)", why=why)
    d_k = Q.shape[1]
    s = K @ Q[query]  # the picture's own column: each raw score q·k_j, before the scale
    scaled = s * attention_scale(d_k)  # q·k_j / √d_k
    (z,), (w,) = scaled_dot_product_attention(Q[query:query + 1], K, V)  # the one definition
    fmt = lambda v, p=2: "[" + ", ".join(f"{x:.{p}f}" for x in v) + "]"  # noqa: E731
    fig, ax = canvas(12.5, 1.0 * n + 1.8, title=f"One query worked through: {tokens[query]!r}, "
                     f"q = {fmt(Q[query])}", scale=0.8)
    cols = [(0.8, "key word", "input"), (2.6, "score q·k_j", "scores"),
            (4.7, f"÷ √d_k = √{d_k}", "scores"), (6.8, "softmax: w_j", "weights"),
            (9.6, "w_j × v_j", "value")]
    top = 1.0 * n + 1.3
    for x, head, _ in cols:
        ax.text(x, top, head, ha="center", va="center", fontsize=9, fontweight="bold")
    for j in range(n):
        y = top - 1.0 * (j + 1)
        cells = [tokens[j], f"{s[j]:.2f}", f"{scaled[j]:.2f}", f"{w[j]:.3f}",
                 f"{w[j]:.3f} × {fmt(V[j])}\n= {fmt(w[j] * V[j], 3)}"]  # 3 places, as w_j
        for (x, _, colour), text in zip(cols, cells, strict=True):
            box(ax, (x, y), text, colour, width=2.6 if x > 9 else 1.4, height=0.7, fontsize=8)
        for x0, x1 in ((1.5, 1.9), (3.3, 4.0), (5.4, 6.1), (7.5, 8.3)):
            arrow(ax, (x0, y), (x1, y))
    box(ax, (9.6, 0.45), f"sum: z = {fmt(z, 3)}", "output", width=2.6, height=0.6, fontsize=8)
    right, rows = 11.15, [top - 1.0 * (j + 1) for j in range(n)]
    for y in rows:  # every row's w_j v_j goes into the sum, not the last row's alone
        ax.plot([10.9, right], [y, y], color="#333333", linewidth=1)
    ax.plot([right, right], [rows[0], 0.45], color="#333333", linewidth=1)
    arrow(ax, (right, 0.45), (10.9, 0.45))
    ax.text(right + 0.2, (rows[0] + rows[-1]) / 2, "+ every row", rotation=90, ha="center",
            va="center", fontsize=8)
    ax.text(6.8, 0.45, f"weights sum to {w.sum():.3f}", ha="center", va="center", fontsize=8)
    return fig


def hatch_masked(ax, mask, label: str = "masked: no weight allowed"):
    """Cover the cells of a heatmap on ``ax`` where ``mask`` (n_q, n_k) is False with hatching.

    mask: bool, True where a query may attend (the library's convention). Masked cells are not
    learned zeros but cells the softmax never sees, so they are drawn as hatched blanks over
    whatever was there (numbers included). Returns the number of cells hatched.
    """
    m = bool_mask(mask, np.shape(mask), "(n_q, n_k)")  # the one check of an attention mask
    has_shape(m, "mask", (None, None), "(n_q, n_k)", "(one bool per cell of the heatmap)")
    cells = np.argwhere(~m)
    for i, j in cells:
        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor="white", edgecolor="#888888",
                               hatch="///", linewidth=0.5, zorder=5))
    if len(cells):
        ax.legend(handles=[Patch(facecolor="white", edgecolor="#888888", hatch="///",
                                 label=label)],
                  loc="lower center", bbox_to_anchor=(0.5, 1.0), fontsize=8, frameon=False,
                  borderaxespad=0.2)
        ax.set_title(ax.get_title(), pad=24)  # the legend sits between the title and the cells
    return len(cells)


# --- notebook 02 ---

def multi_head_flow(n: int, d: int, h: int, shown: int = 3):
    """Data flow of multi-head attention with every shape: split, attend, concatenate, W_O.

    X (n, d) → Q, K, V (n, d) → split each into h heads (h, n, d_k), d_k = d / h → every head
    attends on its own: softmax(Q_i K_iᵀ / √d_k) V_i (n, d_k) → concatenate (n, h·d_k) = (n, d)
    → times W_O (d, d) → output (n, d). ``shown`` heads are drawn (the rest as "…").
    """
    for name, v in (("n", n), ("d", d), ("shown", shown)):
        whole(v, name, low=1)
    h = heads_dividing(h, d)
    d_k = d // h
    drawn = list(range(min(h, shown)))
    if h > len(drawn):
        drawn[-1] = h - 1  # the last head, after a "…"
    span = 1.6 * (len(drawn) - 1)  # from the top head's centre to the bottom one's
    height = max(span + 0.8, 1.3) + 0.4  # the heads' column or the tallest box, and a margin
    c = height / 2  # the row every box and arrow of the flow sits on
    fig, ax = canvas(14.0, height, title=f"Multi-head attention: {h} heads of d_k = d / h = {d_k}")
    box(ax, (0.8, c), f"X\n({n}, {d})", "input", width=1.1)
    box(ax, (3.0, c), f"Q = X W_Q\nK = X W_K\nV = X W_V\neach ({n}, {d})", "query",
        width=1.8, height=1.3)
    arrow(ax, (1.35, c), (2.1, c))
    box(ax, (5.3, c), f"split into heads\n({n}, {d})\n→ ({h}, {n}, {d_k})", "op", width=1.9,
        height=1.1)
    arrow(ax, (3.9, c), (4.35, c))
    ys = [c + span / 2 - 1.6 * k for k in range(len(drawn))]  # the heads, centred on that row
    for y, i in zip(ys, drawn, strict=True):
        box(ax, (8.2, y), f"head {i}: softmax(Q{i} K{i}ᵀ / √d_k) V{i}\n({n}, {d_k})", "weights",
            width=3.4, height=0.8, fontsize=9 if h <= 10 else 7.5)  # two-digit heads: smaller
        arrow(ax, (6.25, c), (6.5, y))
        arrow(ax, (9.9, y), (10.45, c))
    if h > len(drawn):
        ax.text(8.2, (ys[-2] + ys[-1]) / 2, "…", ha="center", va="center", fontsize=14)
    box(ax, (11.2, c), f"concatenate\n({n}, {h}·{d_k})\n= ({n}, {d})", "op", width=1.5,
        height=1.1)
    box(ax, (13.1, c), f"× W_O\n({d}, {d})\n→ ({n}, {d})", "output", width=1.3, height=1.1)
    arrow(ax, (11.95, c), (12.45, c))
    return fig


# --- notebook 05 ---


def tiled_softmax_picture(n_blocks: int = 3):
    """The tiled online softmax of notebook 05: queries meet the keys one block at a time.

    Top row: key/value blocks K_j, V_j (B, d_k). Middle: each block's scores S_j = s·Q K_jᵀ
    (n, B), s = 1/√d_k, the only n-by-something matrix alive. Bottom: the running state (m, ℓ:
    (n, 1); O: (n, d_v)) handed from block to block, rescaled by e^(m − m′), m′ the new running
    maximum; last, out = O / ℓ. The footnote defines every symbol drawn.
    n_blocks: how many key blocks to draw (2..6). Returns the matplotlib Figure.
    """
    whole(n_blocks, "n_blocks", 2, 6)
    step = 3.0
    width = 3.0 + step * n_blocks + 2.0
    fig, ax = canvas(width, 6.2, title="Tiled attention with an online softmax: "
                                       "one block of keys at a time, never the n × n matrix")
    box(ax, (1.2, 3.4), "Q\n(n, d_k)", colour="query", width=1.4, height=1.0)
    box(ax, (1.2, 1.2), "start:\nm = −∞, ℓ = 0\nO = 0", colour="op", width=1.7, height=1.1)
    previous = (2.05, 1.2)
    for j in range(1, n_blocks + 1):
        x = 1.4 + step * j
        box(ax, (x, 5.3), f"K_{j}, V_{j}\n(B, d_k), (B, d_v)", colour="key", width=2.0, height=0.9)
        box(ax, (x, 3.4), f"S_{j} = s·Q K_{j}ᵀ\n(n, B)", colour="scores", width=1.9, height=0.9)
        box(ax, (x, 1.2), f"after block {j}:\nm, ℓ (n, 1)\nO (n, d_v)", colour="weights",
            width=1.9, height=1.1)
        arrow(ax, (x, 4.85), (x, 3.85))
        arrow(ax, (x, 2.95), (x, 1.75), "P = exp(S − m′)", offset=(0.8, -0.1))
        arrow(ax, previous, (x - 0.95, 1.2), "× e^(m−m′)", offset=(0.0, -0.45))
        previous = (x + 0.95, 1.2)
    arrow(ax, (1.9, 3.4), (1.4 + step - 0.95, 3.4), "all n queries,")
    ax.text(1.2 + step / 2, 2.75, "at every block", ha="center", fontsize=8, color="#333333")
    box(ax, (width - 1.1, 1.2), "out = O / ℓ\n(n, d_v)", colour="output", width=1.7, height=0.9)
    arrow(ax, previous, (width - 1.95, 1.2))
    ax.text(width / 2, 0.25, "s = 1/√d_k (the scale); m = running max so far, m′ = new max "
            "after this block, ℓ = running sum, O = running output; B = block size.\n"
            "Each step keeps one (n, B) block of scores, so memory grows like n, not n²",
            ha="center", va="center", fontsize=8)
    return fig


# --- notebook 03 ---
#: Every label of the layer picture: readable when a page scales the 13.6-unit-wide figure down.
LAYER_FONT = 10


def encoder_layer_picture(n: int, d: int, h: int, d_ff: int):
    """One BERT encoder layer (post-LN) as boxes and arrows, every arrow labelled with its shape.

    X (n, d) → multi-head self-attention (h heads of d_k = d/h) → add X (residual) → LayerNorm
    → X₁ (n, d) → feed-forward GELU(X₁W₁ + b₁)W₂ + b₂ through (n, d_ff) → add X₁ → LayerNorm
    → X₂ (n, d). n: pieces, d: width, h: heads, d_ff: feed-forward width (from model.config).
    Returns the matplotlib Figure.
    """
    for label, value in (("n", n), ("d", d), ("d_ff", d_ff)):
        whole(value, label, low=1)
    h = heads_dividing(h, d)
    fig, ax = canvas(13.6, 3.9, title="One encoder layer (BERT normalises after each residual sum)",
                     scale=0.85)
    y, yr = 1.5, 3.0  # the main row, and the row of the residual (skip) paths
    steps = [  # x, text, colour, width
        (0.7, f"X\n({n}, {d})", "input", 1.1),
        (3.3, f"multi-head\nattention\n{h} heads,\nd_k = {d // h}", "weights", 1.9),
        (5.5, "+", "op", 0.5),
        (6.6, "LayerNorm", "op", 1.3),
        (9.6, f"feed-forward\nGELU(X₁W₁+b₁)W₂+b₂\ninside ({n}, {d_ff})", "value", 2.5),
        (11.6, "+", "op", 0.5),
        (12.8, "LayerNorm", "op", 1.3),
    ]
    for x, text, colour, width in steps:
        box(ax, (x, y), text, colour=colour, width=width, height=1.3 if width > 1 else 0.6,
            fontsize=LAYER_FONT)
    edges = [(0.7 + 0.55, 3.3 - 0.95, f"({n}, {d})"), (3.3 + 0.95, 5.5 - 0.25, f"({n}, {d})"),
             (5.5 + 0.25, 6.6 - 0.65, None), (6.6 + 0.65, 9.6 - 1.25, f"X₁\n({n}, {d})"),
             (9.6 + 1.25, 11.6 - 0.25, None), (11.6 + 0.25, 12.8 - 0.65, None)]
    for x0, x1, text in edges:
        arrow(ax, (x0, y), (x1, y), text, fontsize=LAYER_FONT)
    for x_from, x_to, text in ((0.7, 5.5, "residual: X"), (6.6, 11.6, "residual: X₁")):
        ax.plot([x_from, x_from, x_to], [y + 0.6, yr, yr], color="#333333", linewidth=1)
        arrow(ax, (x_to, yr), (x_to, y + 0.3), None)
        ax.text((x_from + x_to) / 2, yr + 0.1, text, ha="center", va="bottom", fontsize=LAYER_FONT)
    ax.text(12.8, y - 0.7, f"X₂ ({n}, {d})\nto the next layer", ha="center", va="top",
            fontsize=LAYER_FONT)
    return fig


def embeddings_and_stack_picture(n: int, d: int, n_layers: int, vocab: int, positions: int,
                         types: int = 2):
    """BERT's input and stack: word + position + segment embeddings, LayerNorm, L layers.

    Three lookup tables, W_word (vocab, d), W_pos (positions, d), W_type (types, d), each give
    one row per piece, (n, d); their sum goes through LayerNorm to E = hidden_states[0], which
    passes through the n_layers encoder layers (each drawn as in ``encoder_layer_picture``), counted
    from
    0 as everywhere in bertlib; layer ℓ's output is hidden_states[ℓ + 1]. Returns the Figure.
    """
    for label, value in (("n", n), ("d", d), ("n_layers", n_layers), ("vocab", vocab),
                         ("positions", positions), ("types", types)):
        whole(value, label, low=1)
    fig, ax = canvas(14.7, 4.4, title=f"From pieces to final vectors: three embeddings, then "
                     f"{n_layers} encoder layers", scale=0.85)
    tables = [(3.7, f"word embedding\nW_word ({vocab}, {d})\nrow of each piece's id", "input"),
              (2.3, f"position embedding\nW_pos ({positions}, {d})\nrows 0 … {n - 1}", "key"),
              (0.9, f"segment embedding\nW_type ({types}, {d})\nrow 0 (sentence A) or 1 (B)",
               "query")]
    for y, text, colour in tables:
        box(ax, (1.5, y), text, colour, width=2.8, height=1.1, fontsize=8)
        arrow(ax, (2.9, y), (4.1, 2.3))
    box(ax, (4.4, 2.3), "+", "op", width=0.5, height=0.6)
    ax.text(4.4, 2.75, f"each ({n}, {d})", ha="center", va="bottom", fontsize=7)
    box(ax, (5.8, 2.3), "LayerNorm", "op", width=1.5, height=0.8)
    arrow(ax, (4.65, 2.3), (5.05, 2.3))
    shown = [0, 1, n_layers - 1] if n_layers > 3 else list(range(n_layers))
    xs = [8.0 + 1.6 * k for k in range(len(shown))]
    if n_layers > 3:
        xs[-1] += 0.8
        ax.text((xs[-2] + xs[-1]) / 2, 2.3, "…", ha="center", va="center", fontsize=14)
    arrow(ax, (6.55, 2.3), (xs[0] - 0.6, 2.3), f"E ({n}, {d})", fontsize=7)
    ax.text(5.8, 1.45, "its output E:\nhidden_states[0]", ha="center", va="top",
            fontsize=7)  # below the box, in line with the layers' outputs, clear of every box
    for k, (x, layer) in enumerate(zip(xs, shown, strict=True)):
        box(ax, (x, 2.3), f"encoder\nlayer {layer}", "weights", width=1.2, height=1.4, fontsize=8)
        ax.text(x, 1.45, f"its output:\nhidden_states[{layer + 1}]", ha="center", va="top",
                fontsize=7)
        if k and shown[k] == shown[k - 1] + 1:
            arrow(ax, (xs[k - 1] + 0.6, 2.3), (x - 0.6, 2.3))
        elif k:  # into and out of the "…"
            arrow(ax, (xs[k - 1] + 0.6, 2.3), ((xs[k - 1] + x) / 2 - 0.3, 2.3))
            arrow(ax, ((xs[k - 1] + x) / 2 + 0.3, 2.3), (x - 0.6, 2.3))
    box(ax, (14.0, 2.3), f"final\nvectors\n({n}, {d})", "output", width=1.1, height=1.2,
        fontsize=8)
    arrow(ax, (xs[-1] + 0.6, 2.3), (13.45, 2.3))
    ax.text(xs[0] + (xs[-1] - xs[0]) / 2, 3.35, f"the same layer design {n_layers} times, each "
            "with its own parameters", ha="center", va="bottom", fontsize=8)
    return fig


# --- notebook 09 ---


def pretraining_step_picture(batch: int = 128, n: int = 16, vocab: int = 102):
    """One masked-LM pre-training step of notebook 09: sentences -> ids (B, N) -> 15 % masked
    (80/10/10) -> BertForMaskedLM -> logits (B, N, V) -> cross-entropy at the chosen positions
    -> AdamW. Shapes use ``batch`` = B, ``n`` = N (padded length) and ``vocab`` = V."""
    for name, value in (("batch", batch), ("n", n), ("vocab", vocab)):
        whole(value, name, low=1)
    fig, ax = canvas(13, 4.2, title="One pre-training step", scale=0.8)
    top, low = 3.0, 1.2
    box(ax, (1.2, top), f"grammar\n{batch} sentences", "input", width=1.9)
    box(ax, (4.0, top), f"tokenizer\nids ({batch}, {n})", "input", width=1.9)
    box(ax, (7.0, top), f"mask 15 %\n80 / 10 / 10\nids' + labels ({batch}, {n})", "op",
        width=2.5, height=1.0)
    box(ax, (10.6, top), f"BertForMaskedLM\nlogits ({batch}, {n}, {vocab})", "output",
        width=2.6)
    box(ax, (10.6, low), "cross-entropy\nat chosen positions\nloss (scalar)", "scores",
        width=2.6, height=1.0)
    box(ax, (7.0, low), "backward\nAdamW + warm-up", "weights", width=2.5)
    arrow(ax, (2.15, top), (3.05, top))
    arrow(ax, (4.95, top), (5.75, top))
    arrow(ax, (8.25, top), (9.3, top))
    arrow(ax, (10.6, top - 0.4), (10.6, low + 0.5))
    arrow(ax, (9.3, low), (8.25, low))
    arrow(ax, (7.0, low + 0.4), (9.6, top - 0.4), "new params", offset=(-0.6, 0.0))
    return fig

