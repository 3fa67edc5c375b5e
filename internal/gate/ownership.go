package gate

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/vacancyd/vacancyd/internal/adapter"
	"github.com/vacancyd/vacancyd/internal/auth"
)

// ComfyUI has no notion of ownership: /history, /view and the event
// WebSocket serve every client. The gate adds it. A borrower may read the
// history of prompts it queued through the gate, the output files that
// history names, and the events of its own client ids, which the gate
// namespaces per borrower so that one cannot listen on another's id.

// Ownership limits: the oldest records are forgotten first.
const (
	maxOwnedPrompts   = 4096
	maxOwnedFiles     = 16384
	maxOwnedBodyBytes = 4 << 20
)

type fileKey struct{ owner, name, subfolder, kind string }

// owners records what each borrower created through a ComfyUI gate.
type owners struct {
	mu          sync.Mutex
	prompts     map[string]string // prompt id -> borrower
	promptOrder []string
	files       map[fileKey]bool
	fileOrder   []fileKey
}

func newOwners() *owners {
	return &owners{prompts: map[string]string{}, files: map[fileKey]bool{}}
}

// borrowerKey names a borrower for ownership: its token, or for callers
// without one, how they were admitted and from where.
func borrowerKey(p auth.Principal) string {
	if p.Via == auth.ViaToken {
		return "token:" + p.Token
	}
	return p.String() + "@" + p.Peer.Addr().String()
}

// namespace is the prefix of a borrower's ComfyUI client ids.
func namespace(borrower string) string {
	sum := sha256.Sum256([]byte(borrower))
	return "vac" + hex.EncodeToString(sum[:6]) + "-"
}

func (o *owners) recordPrompt(id, borrower string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.prompts[id]; ok {
		return
	}
	o.prompts[id] = borrower
	o.promptOrder = append(o.promptOrder, id)
	if len(o.promptOrder) > maxOwnedPrompts {
		delete(o.prompts, o.promptOrder[0])
		o.promptOrder = o.promptOrder[1:]
	}
}

func (o *owners) ownsPrompt(id, borrower string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return id != "" && o.prompts[id] == borrower
}

func (o *owners) recordFile(k fileKey) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.files[k] {
		return
	}
	o.files[k] = true
	o.fileOrder = append(o.fileOrder, k)
	if len(o.fileOrder) > maxOwnedFiles {
		delete(o.files, o.fileOrder[0])
		o.fileOrder = o.fileOrder[1:]
	}
}

func (o *owners) ownsFile(k fileKey) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.files[k]
}

// comfyRoute is the table row's path without ComfyUI's /api prefix.
func comfyRoute(d adapter.Decision) string { return strings.TrimPrefix(d.Pattern, "/api") }

var notOwned = &refusal{status: http.StatusNotFound, outcome: OutcomeNotOwner, errType: "refused_not_owner",
	msg: "no such result among the prompts this borrower queued through the gate"}

// prepare applies ownership to a request about to be forwarded. It may
// rewrite the body (client ids) or the query, and marks the request state so
// that the response is recorded.
func (o *owners) prepare(r *http.Request, d adapter.Decision, borrower string, body []byte, st *reqState) ([]byte, *refusal) {
	ns := namespace(borrower)
	switch route := comfyRoute(d); {
	case r.Method == http.MethodPost && route == "/prompt":
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(body, &doc); err != nil || doc == nil {
			return nil, &refusal{status: http.StatusBadRequest, outcome: OutcomeRequest, errType: "refused_request", msg: "a prompt must be a JSON object"}
		}
		// A borrower-chosen prompt id could name the owner's own prompt;
		// ComfyUI makes a fresh one when none is given.
		delete(doc, "prompt_id")
		// "front" and "number" place a prompt in ComfyUI's queue; a
		// borrower's prompt waits behind the owner's like any other.
		delete(doc, "front")
		delete(doc, "number")
		var cid string
		if raw, ok := doc["client_id"]; ok {
			if err := json.Unmarshal(raw, &cid); err != nil {
				return nil, &refusal{status: http.StatusBadRequest, outcome: OutcomeRequest, errType: "refused_request", msg: "client_id must be a string"}
			}
		}
		if cid == "" {
			// ComfyUI sends the events of a prompt without a client id to
			// every open socket, other borrowers' included.
			cid = randomID()
		}
		// The top-level client_id also overrides any extra_data.client_id
		// (server.py post_prompt), which could name another's socket.
		doc["client_id"], _ = json.Marshal(withNamespace(ns, cid))
		out, err := json.Marshal(doc)
		if err != nil {
			return nil, &refusal{status: http.StatusBadRequest, outcome: OutcomeRequest, errType: "refused_request", msg: "the prompt could not be re-encoded"}
		}
		st.record = recordPrompt
		st.borrower = borrower
		return out, nil
	case route == "/history/{prompt_id}":
		if !o.ownsPrompt(d.Params["prompt_id"], borrower) {
			return nil, notOwned
		}
		st.record = recordOutputs
		st.borrower = borrower
	case route == "/view":
		q := r.URL.Query()
		k := fileKey{owner: borrower, name: q.Get("filename"), subfolder: q.Get("subfolder"), kind: q.Get("type")}
		if k.kind == "" {
			k.kind = "output"
		}
		if !o.ownsFile(k) {
			return nil, notOwned
		}
		// Forward exactly what was checked: one value of each key,
		// re-encoded, so that ComfyUI's query parser cannot read another
		// file out of duplicates or pairs Go's parser dropped.
		q.Set("filename", k.name)
		q.Set("subfolder", k.subfolder)
		q.Set("type", k.kind)
		r.URL.RawQuery = q.Encode()
	case route == "/ws":
		q := r.URL.Query()
		cid := q.Get("clientId")
		if cid == "" {
			cid = randomID()
		}
		q.Set("clientId", withNamespace(ns, cid))
		r.URL.RawQuery = q.Encode()
	}
	return body, nil
}

func withNamespace(ns, id string) string {
	if strings.HasPrefix(id, ns) {
		return id
	}
	return ns + id
}

// Kinds of response a request's state asks to record.
const (
	recordNothing = iota
	recordPrompt
	recordOutputs
)

// observe records what a successful response created or revealed.
func (o *owners) observe(resp *http.Response, st *reqState) error {
	if st.record == recordNothing || resp.StatusCode != http.StatusOK || resp.ContentLength > maxOwnedBodyBytes {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxOwnedBodyBytes+1))
	resp.Body.Close()
	if err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	if len(b) > maxOwnedBodyBytes {
		return nil
	}
	switch st.record {
	case recordPrompt:
		var v struct {
			PromptID string `json:"prompt_id"`
		}
		if json.Unmarshal(b, &v) == nil && v.PromptID != "" {
			o.recordPrompt(v.PromptID, st.borrower)
			if st.work != nil {
				// The prompt runs after this answer: track it to its end.
				st.work.SetJob(v.PromptID)
				st.job = true
			}
		}
	case recordOutputs:
		// {"<id>": {"outputs": {"<node>": {"images": [{"filename","subfolder","type"}], ...}}}}
		var h map[string]struct {
			Outputs map[string]map[string]json.RawMessage `json:"outputs"`
		}
		if json.Unmarshal(b, &h) != nil {
			return nil
		}
		for _, entry := range h {
			for _, node := range entry.Outputs {
				for _, list := range node {
					var files []struct {
						Filename  string `json:"filename"`
						Subfolder string `json:"subfolder"`
						Type      string `json:"type"`
					}
					if json.Unmarshal(list, &files) != nil {
						continue
					}
					for _, f := range files {
						if f.Filename != "" {
							o.recordFile(fileKey{owner: st.borrower, name: f.Filename, subfolder: f.Subfolder, kind: f.Type})
						}
					}
				}
			}
		}
	}
	return nil
}
