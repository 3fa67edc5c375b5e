package fakeupstream

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
)

// DefaultChatterboxVoices are the predefined voices a Chatterbox fake has
// without WithVoices.
var DefaultChatterboxVoices = []string{"Abigail.wav", "Emily.wav", "Gabriel.wav", "Olivia.wav"}

// ChatterboxSampleRate is the sample rate of the fake's audio (S3GEN_SR).
const ChatterboxSampleRate = 24000

// Chatterbox fakes devnen's Chatterbox-TTS-Server (FastAPI).
type Chatterbox struct {
	*Server

	mu       sync.Mutex
	voices   []string
	refs     []string
	loaded   bool
	settings map[string]any
}

// StartChatterbox starts a Chatterbox-TTS-Server fake on a loopback port.
func StartChatterbox(t testing.TB, opts ...Option) *Chatterbox {
	t.Helper()
	c := &Chatterbox{Server: newServer(KindChatterbox, opts), loaded: true}
	c.voices = c.cfg.voices
	if len(c.voices) == 0 {
		c.voices = append([]string(nil), DefaultChatterboxVoices...)
	}
	c.settings = defaultChatterboxConfig()
	c.unauth = func(w http.ResponseWriter, r *http.Request) {
		c.challenge(w)
		fastapiDetail(w, http.StatusUnauthorized, "Not authenticated")
	}
	c.handler = c.routes()
	c.listen(t)
	return c
}

// Loaded reports whether the fake's TTS model is loaded (see /api/unload).
func (c *Chatterbox) Loaded() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.loaded
}

// ReferenceFiles lists the uploaded reference audio files.
func (c *Chatterbox) ReferenceFiles() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.refs...)
}

func defaultChatterboxConfig() map[string]any {
	return map[string]any{
		"server":     map[string]any{"host": "0.0.0.0", "port": 8004, "log_file_path": "logs/tts_server.log", "enable_performance_monitor": false},
		"model":      map[string]any{"repo_id": "chatterbox-turbo"},
		"tts_engine": map[string]any{"device": "auto", "predefined_voices_path": "voices", "reference_audio_path": "reference_audio", "default_voice_id": "Emily.wav"},
		"paths":      map[string]any{"model_cache": "model_cache", "output": "outputs"},
		"generation_defaults": map[string]any{"temperature": 0.8, "exaggeration": 0.5, "cfg_weight": 0.5,
			"seed": 0, "speed_factor": 1.0, "language": "en"},
		"audio_output": map[string]any{"format": "wav", "sample_rate": ChatterboxSampleRate, "max_reference_duration_sec": 30, "save_to_disk": false},
		"ui_state":     map[string]any{"last_text": "", "last_voice_mode": "predefined", "last_predefined_voice": nil, "last_reference_file": nil, "last_seed": 0, "hide_chunk_warning": false, "hide_generation_warning": false, "theme": "dark"},
		"ui":           map[string]any{"title": "Chatterbox TTS Server", "show_language_select": true, "max_predefined_voices_in_dropdown": 20},
		"debug":        map[string]any{"save_intermediate_audio": false},
	}
}

func (c *Chatterbox) routes() http.Handler {
	rt := &router{
		notFound: func(w http.ResponseWriter, r *http.Request) { fastapiDetail(w, http.StatusNotFound, "Not Found") },
		notAllowed: func(w http.ResponseWriter, r *http.Request) {
			fastapiDetail(w, http.StatusMethodNotAllowed, "Method Not Allowed")
		},
	}
	rt.handle("GET", "/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, "<!DOCTYPE html><html><head><title>Chatterbox TTS Server</title></head><body></body></html>")
	})
	rt.handle("GET", "/api/model-info", func(w http.ResponseWriter, r *http.Request) { fastapiJSON(w, http.StatusOK, c.modelInfo()) })
	rt.handle("GET", "/api/ui/initial-data", c.initialData)
	rt.handle("POST", "/save_settings", c.saveSettings)
	rt.handle("POST", "/reset_settings", func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.settings = defaultChatterboxConfig()
		c.mu.Unlock()
		fastapiJSON(w, http.StatusOK, map[string]any{"message": "Configuration reset to defaults. Please reload the page. A server restart may be beneficial.", "restart_needed": true})
	})
	rt.handle("POST", "/restart_server", func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.loaded = true
		c.mu.Unlock()
		fastapiJSON(w, http.StatusOK, map[string]any{"message": "Model hot-swap successful. Now running: ChatterboxTurboTTS (turbo)", "restart_needed": false})
	})
	rt.handle("POST", "/api/unload", func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.loaded = false
		c.mu.Unlock()
		fastapiJSON(w, http.StatusOK, map[string]any{"status": "unloaded"})
	})
	rt.handle("GET", "/get_reference_files", func(w http.ResponseWriter, r *http.Request) { fastapiJSON(w, http.StatusOK, c.referenceList()) })
	rt.handle("GET", "/get_predefined_voices", func(w http.ResponseWriter, r *http.Request) { fastapiJSON(w, http.StatusOK, c.voiceList()) })
	rt.handle("POST", "/upload_reference", func(w http.ResponseWriter, r *http.Request) { c.upload(w, r, false) })
	rt.handle("POST", "/upload_predefined_voice", func(w http.ResponseWriter, r *http.Request) { c.upload(w, r, true) })
	rt.handle("POST", "/tts", c.tts)
	rt.handle("POST", "/v1/audio/speech", c.speech)
	return rt
}

func fastapiJSON(w http.ResponseWriter, status int, v any) {
	writeJSON(w, status, "application/json", v)
}

func fastapiDetail(w http.ResponseWriter, status int, detail string) {
	fastapiJSON(w, status, map[string]any{"detail": detail})
}

func (c *Chatterbox) modelInfo() map[string]any {
	c.mu.Lock()
	loaded := c.loaded
	c.mu.Unlock()
	if !loaded {
		return map[string]any{"loaded": false, "type": nil, "class_name": nil, "device": nil, "sample_rate": nil,
			"supports_paralinguistic_tags": false, "available_paralinguistic_tags": []string{}, "turbo_available_in_package": true}
	}
	return map[string]any{"loaded": true, "type": "turbo", "class_name": "ChatterboxTurboTTS", "device": "cuda",
		"sample_rate": ChatterboxSampleRate, "supports_paralinguistic_tags": true,
		"available_paralinguistic_tags": []string{"laugh", "chuckle", "sigh", "gasp", "cough", "clear throat", "sniff", "groan", "shush"},
		"turbo_available_in_package":    true}
}

func (c *Chatterbox) referenceList() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := append([]string{}, c.refs...)
	slices.Sort(out)
	return out
}

// voiceList is utils.get_predefined_voices: display names from file stems.
func (c *Chatterbox) voiceList() []map[string]string {
	c.mu.Lock()
	files := append([]string(nil), c.voices...)
	c.mu.Unlock()
	out := []map[string]string{}
	for _, f := range files {
		stem := strings.TrimSuffix(f, path.Ext(f))
		fields := strings.Fields(strings.NewReplacer("_", " ", "-", " ").Replace(stem))
		for i, w := range fields {
			r := []rune(strings.ToLower(w))
			r[0] = unicode.ToUpper(r[0])
			fields[i] = string(r)
		}
		name := strings.Join(fields, " ")
		if name == "" {
			name = stem
		}
		out = append(out, map[string]string{"display_name": name, "filename": f})
	}
	slices.SortFunc(out, func(a, b map[string]string) int {
		return strings.Compare(strings.ToLower(a["display_name"]), strings.ToLower(b["display_name"]))
	})
	return out
}

func (c *Chatterbox) initialData(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	cfg := c.settings
	c.mu.Unlock()
	fastapiJSON(w, http.StatusOK, map[string]any{
		"config":            cfg,
		"reference_files":   c.referenceList(),
		"predefined_voices": c.voiceList(),
		"presets":           []any{},
		"initial_gen_result": map[string]any{"outputUrl": nil, "filename": nil, "genTime": nil,
			"submittedVoiceMode": nil, "submittedPredefinedVoice": nil, "submittedCloneFile": nil},
		"model_info": c.modelInfo(),
	})
}

func mergeInto(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeInto(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

func (c *Chatterbox) saveSettings(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		fastapiDetail(w, http.StatusInternalServerError, "Internal server error during settings save: Expecting value: line 1 column 1 (char 0)")
		return
	}
	update, ok := v.(map[string]any)
	if !ok {
		fastapiDetail(w, http.StatusBadRequest, "Invalid request data: Request body must be a JSON object for /save_settings.")
		return
	}
	c.mu.Lock()
	// Copy on write: initial-data hands out the current map.
	next := map[string]any{}
	cur, _ := json.Marshal(c.settings)
	_ = json.Unmarshal(cur, &next)
	mergeInto(next, update)
	c.settings = next
	c.mu.Unlock()
	msg := "Settings saved successfully."
	restart := false
	for _, k := range []string{"server", "tts_engine", "paths", "model"} {
		if _, ok := update[k]; ok {
			restart = true
		}
	}
	if restart {
		msg += " A server restart may be required for some changes to take full effect."
	}
	fastapiJSON(w, http.StatusOK, map[string]any{"message": msg, "restart_needed": restart})
}

// validationError is one entry of FastAPI's 422 detail list.
func validationError(typ string, loc []any, msg string, input any, ctx map[string]any) map[string]any {
	e := map[string]any{"type": typ, "loc": loc, "msg": msg, "input": input}
	if ctx != nil {
		e["ctx"] = ctx
	}
	return e
}

// bindBody reads a JSON object body as FastAPI does, answering 422 when it
// cannot.
func bindBody(w http.ResponseWriter, r *http.Request) (map[string]any, bool) {
	body, _ := io.ReadAll(r.Body)
	if len(bytes.TrimSpace(body)) == 0 {
		fastapiJSON(w, http.StatusUnprocessableEntity, map[string]any{"detail": []any{
			validationError("missing", []any{"body"}, "Field required", nil, nil)}})
		return nil, false
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		fastapiJSON(w, http.StatusUnprocessableEntity, map[string]any{"detail": []any{
			validationError("json_invalid", []any{"body", 0}, "JSON decode error", map[string]any{}, map[string]any{"error": "Expecting value"})}})
		return nil, false
	}
	m, ok := v.(map[string]any)
	if !ok {
		fastapiJSON(w, http.StatusUnprocessableEntity, map[string]any{"detail": []any{
			validationError("model_attributes_type", []any{"body"}, "Input should be a valid dictionary or object to extract fields from", v, nil)}})
		return nil, false
	}
	return m, true
}

type fieldCheck struct {
	errs []any
	body map[string]any
}

func (f *fieldCheck) str(name string, required bool, minLen int) (string, bool) {
	v, ok := f.body[name]
	if !ok || v == nil {
		if required {
			f.errs = append(f.errs, validationError("missing", []any{"body", name}, "Field required", f.body, nil))
		}
		return "", false
	}
	s, ok := v.(string)
	if !ok {
		f.errs = append(f.errs, validationError("string_type", []any{"body", name}, "Input should be a valid string", v, nil))
		return "", false
	}
	if len(s) < minLen {
		f.errs = append(f.errs, validationError("string_too_short", []any{"body", name},
			fmt.Sprintf("String should have at least %d character", minLen), s, map[string]any{"min_length": minLen}))
	}
	return s, true
}

func (f *fieldCheck) literal(name, def string, allowed ...string) string {
	v, ok := f.body[name]
	if !ok || v == nil {
		return def
	}
	s, _ := v.(string)
	if slices.Contains(allowed, s) {
		return s
	}
	q := make([]string, len(allowed))
	for i, a := range allowed {
		q[i] = "'" + a + "'"
	}
	expected := strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
	f.errs = append(f.errs, validationError("literal_error", []any{"body", name}, "Input should be "+expected, v, map[string]any{"expected": expected}))
	return def
}

func (f *fieldCheck) number(name string, lo, hi float64) (float64, bool) {
	v, ok := f.body[name]
	if !ok || v == nil {
		return 0, false
	}
	n, ok := v.(json.Number)
	if !ok {
		f.errs = append(f.errs, validationError("float_parsing", []any{"body", name}, "Input should be a valid number", v, nil))
		return 0, false
	}
	x, _ := n.Float64()
	if x < lo {
		f.errs = append(f.errs, validationError("greater_than_equal", []any{"body", name},
			fmt.Sprintf("Input should be greater than or equal to %v", lo), v, map[string]any{"ge": lo}))
	} else if x > hi {
		f.errs = append(f.errs, validationError("less_than_equal", []any{"body", name},
			fmt.Sprintf("Input should be less than or equal to %v", hi), v, map[string]any{"le": hi}))
	}
	return x, true
}

func (f *fieldCheck) fail(w http.ResponseWriter) bool {
	if len(f.errs) == 0 {
		return false
	}
	fastapiJSON(w, http.StatusUnprocessableEntity, map[string]any{"detail": f.errs})
	return true
}

func (c *Chatterbox) hasVoice(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Contains(c.voices, name)
}

func (c *Chatterbox) hasRef(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Contains(c.refs, name)
}

func (c *Chatterbox) tts(w http.ResponseWriter, r *http.Request) {
	body, ok := bindBody(w, r)
	if !ok {
		return
	}
	f := &fieldCheck{body: body}
	text, _ := f.str("text", true, 1)
	mode := f.literal("voice_mode", "predefined", "predefined", "clone")
	format := f.literal("output_format", "wav", "wav", "opus", "mp3")
	f.number("chunk_size", 50, 500)
	voiceID, _ := f.str("predefined_voice_id", false, 0)
	refFile, _ := f.str("reference_audio_filename", false, 0)
	if f.fail(w) {
		return
	}
	if !c.Loaded() {
		fastapiDetail(w, http.StatusServiceUnavailable, "TTS engine model is not currently loaded or available.")
		return
	}
	switch mode {
	case "predefined":
		if voiceID == "" {
			fastapiDetail(w, http.StatusBadRequest, "Missing 'predefined_voice_id' for 'predefined' voice mode.")
			return
		}
		if !c.hasVoice(voiceID) {
			fastapiDetail(w, http.StatusNotFound, fmt.Sprintf("Predefined voice file '%s' not found.", voiceID))
			return
		}
	case "clone":
		if refFile == "" {
			fastapiDetail(w, http.StatusBadRequest, "Missing 'reference_audio_filename' for 'clone' voice mode.")
			return
		}
		if !c.hasRef(refFile) {
			fastapiDetail(w, http.StatusNotFound, fmt.Sprintf("Reference audio file '%s' not found.", refFile))
			return
		}
	}
	name := fmt.Sprintf("tts_output_%s.%s", time.Now().Format("20060102_150405"), format)
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	c.stream(w, r, "audio/"+format, audio(format, text))
}

func (c *Chatterbox) speech(w http.ResponseWriter, r *http.Request) {
	body, ok := bindBody(w, r)
	if !ok {
		return
	}
	f := &fieldCheck{body: body}
	f.str("model", true, 0)
	input, _ := f.str("input", true, 0)
	voice, _ := f.str("voice", true, 0)
	format := f.literal("response_format", "wav", "wav", "opus", "mp3")
	f.number("speed", math.Inf(-1), math.Inf(1))
	if f.fail(w) {
		return
	}
	if !c.hasVoice(voice) && !c.hasRef(voice) {
		fastapiDetail(w, http.StatusNotFound, fmt.Sprintf("Voice file '%s' not found.", voice))
		return
	}
	if !c.Loaded() {
		fastapiDetail(w, http.StatusServiceUnavailable, "TTS engine model is not currently loaded or available.")
		return
	}
	c.stream(w, r, "audio/"+format, audio(format, input))
}

// stream sends data in WithTokens chunks with Transfer-Encoding: chunked
// (a StreamingResponse has no Content-Length), paced like tokens.
func (c *Chatterbox) stream(w http.ResponseWriter, r *http.Request, contentType string, data []byte) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(http.StatusOK)
	n := c.cfg.tokens
	size := (len(data) + n - 1) / n
	for i := 0; i < n && i*size < len(data); i++ {
		if !c.pace(r, i) {
			return
		}
		end := min((i+1)*size, len(data))
		if !writeChunk(w, r, data[i*size:end]) {
			return
		}
	}
}

// audio is the fake's speech for text: a quiet tone, 50 ms a character.
func audio(format, text string) []byte {
	samples := max(len(text)*ChatterboxSampleRate/20, ChatterboxSampleRate/10)
	switch format {
	case "opus":
		return fakeEncoded([]byte("OggS\x00\x02"), samples/8)
	case "mp3":
		return fakeEncoded([]byte("ID3\x04\x00\x00\x00\x00\x00\x00\xff\xfb\x90\x64"), samples/10)
	}
	return WAV(samples)
}

func fakeEncoded(magic []byte, n int) []byte {
	b := make([]byte, n)
	copy(b, magic)
	for i := len(magic); i < n; i++ {
		b[i] = byte(i * 31)
	}
	return b
}

// WAV is a mono 16-bit PCM WAV file of samples samples at
// ChatterboxSampleRate (what the fake's TTS routes answer).
func WAV(samples int) []byte {
	var b bytes.Buffer
	dataLen := samples * 2
	b.WriteString("RIFF")
	_ = binary.Write(&b, binary.LittleEndian, uint32(36+dataLen))
	b.WriteString("WAVEfmt ")
	for _, v := range []any{uint32(16), uint16(1), uint16(1),
		uint32(ChatterboxSampleRate), uint32(ChatterboxSampleRate * 2), uint16(2), uint16(16)} {
		_ = binary.Write(&b, binary.LittleEndian, v)
	}
	b.WriteString("data")
	_ = binary.Write(&b, binary.LittleEndian, uint32(dataLen))
	for i := 0; i < samples; i++ {
		v := int16(3000 * math.Sin(2*math.Pi*220*float64(i)/ChatterboxSampleRate))
		_ = binary.Write(&b, binary.LittleEndian, v)
	}
	return b.Bytes()
}

// upload is /upload_reference and /upload_predefined_voice (multipart
// "files").
func (c *Chatterbox) upload(w http.ResponseWriter, r *http.Request, predefined bool) {
	if err := r.ParseMultipartForm(64 << 20); err != nil || r.MultipartForm == nil || len(r.MultipartForm.File["files"]) == 0 {
		fastapiJSON(w, http.StatusUnprocessableEntity, map[string]any{"detail": []any{
			validationError("missing", []any{"body", "files"}, "Field required", nil, nil)}})
		return
	}
	files := r.MultipartForm.File["files"]
	uploaded := []string{}
	errs := []map[string]string{}
	for _, fh := range files {
		if fh.Filename == "" {
			errs = append(errs, map[string]string{"filename": "Unknown", "error": "File received with no filename."})
			continue
		}
		name := path.Base(strings.ReplaceAll(fh.Filename, "\\", "/"))
		lower := strings.ToLower(name)
		if !strings.HasSuffix(lower, ".wav") && !strings.HasSuffix(lower, ".mp3") {
			msg := "Invalid file type. Only .wav and .mp3 are allowed."
			if predefined {
				msg = "Invalid file type. Only .wav and .mp3 are allowed for predefined voices."
			}
			errs = append(errs, map[string]string{"filename": fh.Filename, "error": msg})
			continue
		}
		c.mu.Lock()
		list := &c.refs
		if predefined {
			list = &c.voices
		}
		if !slices.Contains(*list, name) {
			*list = append(*list, name)
		}
		c.mu.Unlock()
		if !slices.Contains(uploaded, name) {
			uploaded = append(uploaded, name)
		}
	}
	status := http.StatusOK
	if len(errs) > 0 && len(uploaded) == 0 {
		status = http.StatusBadRequest
	}
	resp := map[string]any{"uploaded_files": uploaded, "errors": errs}
	if predefined {
		resp["message"] = fmt.Sprintf("Processed %d predefined voice file(s).", len(files))
		resp["all_predefined_voices"] = c.voiceList()
	} else {
		resp["message"] = fmt.Sprintf("Processed %d file(s).", len(files))
		resp["all_reference_files"] = c.referenceList()
	}
	fastapiJSON(w, status, resp)
}
