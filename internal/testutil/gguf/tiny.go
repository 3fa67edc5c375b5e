package gguf

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// TinyConfig shapes the tiny llama model. The zero value of a field means
// its default (see DefaultTiny).
type TinyConfig struct {
	// Name is general.name.
	Name string
	// Layers is llama.block_count.
	Layers int
	// Width is llama.embedding_length.
	Width int
	// FeedForward is llama.feed_forward_length.
	FeedForward int
	// Heads and KVHeads are the attention head counts (KVHeads divides Heads).
	Heads, KVHeads int
	// Context is llama.context_length.
	Context int
	// Seed makes the weights; the same config always gives the same bytes.
	Seed uint64
}

// DefaultTiny is the model the end-to-end tests use: two layers of width
// 64, four heads sharing two key/value heads, F32 weights, about 0.4 MB.
var DefaultTiny = TinyConfig{
	Name:        "vacancyd-tiny",
	Layers:      2,
	Width:       64,
	FeedForward: 128,
	Heads:       4,
	KVHeads:     2,
	Context:     8192,
	Seed:        0x7661636e,
}

// PlainPieces are the tokenizer's ordinary pieces after the byte tokens:
// SentencePiece's word boundary "▁" (a space when decoded), a-z, "." and
// ",". Anything else in a prompt falls back to the <0xNN> byte tokens.
var PlainPieces = func() []string {
	out := []string{"\u2581"}
	for c := 'a'; c <= 'z'; c++ {
		out = append(out, string(c))
	}
	return append(out, ".", ",")
}()

// Token ids of the control tokens (SentencePiece's llama layout).
const (
	TokenUnknown = 0
	TokenBOS     = 1
	TokenEOS     = 2
	// FirstByteToken is <0x00>; <0xNN> is FirstByteToken+NN.
	FirstByteToken = 3
	// FirstPlainToken is PlainPieces[0].
	FirstPlainToken = FirstByteToken + 256
)

// llama.cpp's token types (llama_token_type).
const (
	tokenTypeNormal  int32 = 1
	tokenTypeUnknown int32 = 2
	tokenTypeControl int32 = 3
	tokenTypeByte    int32 = 6
)

// Tiny returns DefaultTiny's model file.
func Tiny() []byte {
	b, err := DefaultTiny.Build()
	if err != nil {
		panic(err) // DefaultTiny is valid; a test covers it
	}
	return b
}

func (c TinyConfig) withDefaults() TinyConfig {
	d := DefaultTiny
	if c.Name != "" {
		d.Name = c.Name
	}
	if c.Layers != 0 {
		d.Layers = c.Layers
	}
	if c.Width != 0 {
		d.Width = c.Width
	}
	if c.FeedForward != 0 {
		d.FeedForward = c.FeedForward
	}
	if c.Heads != 0 {
		d.Heads = c.Heads
	}
	if c.KVHeads != 0 {
		d.KVHeads = c.KVHeads
	}
	if c.Context != 0 {
		d.Context = c.Context
	}
	if c.Seed != 0 {
		d.Seed = c.Seed
	}
	return d
}

// Vocabulary returns the tokenizer's pieces, scores and token types: <unk>,
// <s>, </s>, the 256 byte tokens <0x00>..<0xFF>, then PlainPieces.
func Vocabulary() (tokens []string, scores []float32, types []int32) {
	tokens = []string{"<unk>", "<s>", "</s>"}
	scores = []float32{0, 0, 0}
	types = []int32{tokenTypeUnknown, tokenTypeControl, tokenTypeControl}
	for b := range 256 {
		tokens = append(tokens, fmt.Sprintf("<0x%02X>", b))
		scores = append(scores, 0)
		types = append(types, tokenTypeByte)
	}
	for i, p := range PlainPieces {
		tokens = append(tokens, p)
		scores = append(scores, -float32(i+1))
		types = append(types, tokenTypeNormal)
	}
	return tokens, scores, types
}

// Build returns the model file: a GGUF v3 llama model with the keys
// llama.cpp's loader reads (llama-model.cpp load_hparams, llama-vocab.cpp
// load) and Ollama's reader uses for its memory estimate (fs/ggml), and
// the tensors llama-model.cpp load_tensors creates for LLM_ARCH_LLAMA.
//
// The weights are random (a fixed seed) but shaped so that generation
// streams ordinary text for as long as it is allowed to: dimension 0 of
// every token embedding is a large constant that the small layers cannot
// flip, and the output matrix turns it into a strong bonus for the plain
// pieces and a strong penalty for <unk>, <s> and </s>. So the model never
// samples end-of-text (a generation ends only at num_predict or when it is
// cancelled), and what it writes is lower-case letters, spaces and
// punctuation chosen by the random part of the weights.
func (c TinyConfig) Build() ([]byte, error) {
	c = c.withDefaults()
	switch {
	case c.Layers < 1 || c.Width < 8 || c.FeedForward < 1 || c.Context < 16:
		return nil, fmt.Errorf("gguf: tiny model needs layers >= 1, width >= 8, feed_forward >= 1, context >= 16: %+v", c)
	case c.Heads < 1 || c.Width%c.Heads != 0 || (c.Width/c.Heads)%2 != 0:
		return nil, fmt.Errorf("gguf: heads (%d) must divide width (%d) into even head sizes", c.Heads, c.Width)
	case c.KVHeads < 1 || c.Heads%c.KVHeads != 0:
		return nil, fmt.Errorf("gguf: kv heads (%d) must divide heads (%d)", c.KVHeads, c.Heads)
	}
	tokens, scores, types := Vocabulary()
	vocab := len(tokens)
	headDim := c.Width / c.Heads
	kvWidth := headDim * c.KVHeads

	kvs := []KV{
		{"general.architecture", "llama"},
		{"general.name", c.Name},
		{"general.file_type", uint32(0)}, // LLAMA_FTYPE_ALL_F32
		{"general.alignment", uint32(DefaultAlignment)},
		{"llama.vocab_size", uint32(vocab)},
		{"llama.context_length", uint32(c.Context)},
		{"llama.embedding_length", uint32(c.Width)},
		{"llama.block_count", uint32(c.Layers)},
		{"llama.feed_forward_length", uint32(c.FeedForward)},
		{"llama.attention.head_count", uint32(c.Heads)},
		{"llama.attention.head_count_kv", uint32(c.KVHeads)},
		{"llama.attention.layer_norm_rms_epsilon", float32(1e-5)},
		{"llama.rope.dimension_count", uint32(headDim)},
		{"llama.rope.freq_base", float32(10000)},
		{"tokenizer.ggml.model", "llama"},
		{"tokenizer.ggml.tokens", tokens},
		{"tokenizer.ggml.scores", scores},
		{"tokenizer.ggml.token_type", types},
		{"tokenizer.ggml.unknown_token_id", uint32(TokenUnknown)},
		{"tokenizer.ggml.bos_token_id", uint32(TokenBOS)},
		{"tokenizer.ggml.eos_token_id", uint32(TokenEOS)},
		{"tokenizer.ggml.add_bos_token", true},
		{"tokenizer.ggml.add_eos_token", false},
	}

	rng := rand.New(rand.NewPCG(c.Seed, c.Seed^0x9e3779b97f4a7c15))
	normal := func(n int, std float64) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(rng.NormFloat64() * std)
		}
		return out
	}
	ones := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = 1
		}
		return out
	}
	// Layer weights scaled like a freshly initialised network (1/sqrt(in))
	// and then shrunk, so the residual stream stays close to the embedding.
	matrix := func(in, out int) []float32 { return normal(in*out, 0.25/math.Sqrt(float64(in))) }

	const carrier = 4.0 // embedding dimension 0, the same for every token
	embd := normal(c.Width*vocab, 0.5)
	for t := range vocab {
		embd[t*c.Width] = carrier
	}
	const bonus = 2.0 // output weight on dimension 0: plain +, control -
	output := normal(c.Width*vocab, 0.3)
	for t := range vocab {
		var w float32
		switch {
		case t < FirstByteToken:
			w = -bonus
		case t >= FirstPlainToken:
			w = bonus
		}
		output[t*c.Width] = w
	}

	tensors := []Tensor{
		{Name: "token_embd.weight", Shape: []uint64{uint64(c.Width), uint64(vocab)}, Data: embd},
		{Name: "output_norm.weight", Shape: []uint64{uint64(c.Width)}, Data: ones(c.Width)},
		{Name: "output.weight", Shape: []uint64{uint64(c.Width), uint64(vocab)}, Data: output},
	}
	w, ff, kv := uint64(c.Width), uint64(c.FeedForward), uint64(kvWidth)
	for i := range c.Layers {
		blk := func(s string) string { return fmt.Sprintf("blk.%d.%s.weight", i, s) }
		tensors = append(tensors,
			Tensor{Name: blk("attn_norm"), Shape: []uint64{w}, Data: ones(c.Width)},
			Tensor{Name: blk("attn_q"), Shape: []uint64{w, w}, Data: matrix(c.Width, c.Width)},
			Tensor{Name: blk("attn_k"), Shape: []uint64{w, kv}, Data: matrix(c.Width, kvWidth)},
			Tensor{Name: blk("attn_v"), Shape: []uint64{w, kv}, Data: matrix(c.Width, kvWidth)},
			Tensor{Name: blk("attn_output"), Shape: []uint64{w, w}, Data: matrix(c.Width, c.Width)},
			Tensor{Name: blk("ffn_norm"), Shape: []uint64{w}, Data: ones(c.Width)},
			Tensor{Name: blk("ffn_gate"), Shape: []uint64{w, ff}, Data: matrix(c.Width, c.FeedForward)},
			Tensor{Name: blk("ffn_up"), Shape: []uint64{w, ff}, Data: matrix(c.Width, c.FeedForward)},
			Tensor{Name: blk("ffn_down"), Shape: []uint64{ff, w}, Data: matrix(c.FeedForward, c.Width)},
		)
	}
	return Encode(kvs, tensors)
}
