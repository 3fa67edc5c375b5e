package fakeupstream

// What the fakes generate (tokens, embeddings, ids) and small writers.

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// words is the text every fake generates, one word a token.
var words = []string{"The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", "."}

// Token is the i-th generated token (0-based).
func Token(i int) string { return words[i%len(words)] }

// Text is the text of the first n generated tokens.
func Text(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(Token(i))
	}
	return b.String()
}

// genCount is how many tokens a generation produces given the request's own
// limit (<= 0: none), and whether the limit cut it short.
func (s *Server) genCount(limit int) (n int, cut bool) {
	n = s.cfg.tokens
	if limit > 0 && limit < n {
		return limit, true
	}
	return n, false
}

// countWords is a rough token count for prompts.
func countWords(ss ...string) int {
	n := 0
	for _, s := range ss {
		n += len(strings.Fields(s))
	}
	if n == 0 {
		n = 1
	}
	return n
}

// embedding is a deterministic unit vector of dim values for text.
func embedding(text string, dim int) []float64 {
	v := make([]float64, dim)
	h := uint64(14695981039346656037)
	for _, c := range []byte(text) {
		h ^= uint64(c)
		h *= 1099511628211
	}
	var sum float64
	for i := range v {
		h ^= h >> 33
		h *= 0xff51afd7ed558ccd
		h ^= h >> 33
		v[i] = float64(int64(h%2001)-1000) / 1000
		sum += v[i] * v[i]
	}
	if sum == 0 {
		v[0], sum = 1, 1
	}
	norm := 1 / sqrt(sum)
	for i := range v {
		v[i] *= norm
	}
	return v
}

func sqrt(x float64) float64 {
	z := x
	for i := 0; i < 40; i++ {
		z -= (z*z - x) / (2 * z)
	}
	return z
}

func writeJSON(w http.ResponseWriter, status int, contentType string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", fmt.Sprint(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// randomAlnum is n random letters and digits (llama.cpp's random_string).
func randomAlnum(n int) string {
	const chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = chars[int(b[i])%len(chars)]
	}
	return string(b)
}

// newUUID is a random RFC 4122 version 4 UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
