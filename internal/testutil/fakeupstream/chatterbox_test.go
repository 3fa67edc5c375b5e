package fakeupstream

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"slices"
	"strings"
	"testing"
)

func checkWAV(t *testing.T, b []byte) int {
	t.Helper()
	if len(b) < 44 || string(b[:4]) != "RIFF" || string(b[8:16]) != "WAVEfmt " || string(b[36:40]) != "data" {
		t.Fatalf("not a WAV: % x", b[:min(len(b), 44)])
	}
	if rate := binary.LittleEndian.Uint32(b[24:28]); rate != ChatterboxSampleRate {
		t.Fatalf("rate %d", rate)
	}
	n := int(binary.LittleEndian.Uint32(b[40:44]))
	if n != len(b)-44 || int(binary.LittleEndian.Uint32(b[4:8])) != len(b)-8 {
		t.Fatalf("sizes: data %d, file %d", n, len(b))
	}
	return n / 2
}

func TestChatterboxTTSStreamsChunkedWAV(t *testing.T) {
	c := StartChatterbox(t, WithTokens(4))
	req, _ := http.NewRequestWithContext(waitCtx(t), "POST", c.URL+"/tts",
		strings.NewReader(`{"text":"Hello there","voice_mode":"predefined","predefined_voice_id":"Emily.wav"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "audio/wav" ||
		!slices.Contains(resp.TransferEncoding, "chunked") || resp.ContentLength != -1 ||
		!strings.HasPrefix(resp.Header.Get("Content-Disposition"), `attachment; filename="tts_output_`) {
		t.Fatalf("response %d %v %v", resp.StatusCode, resp.Header, resp.TransferEncoding)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if samples := checkWAV(t, b); samples != len("Hello there")*ChatterboxSampleRate/20 {
		t.Fatalf("samples %d", samples)
	}
	r, _ := c.Last()
	var body map[string]string
	if err := r.JSON(&body); err != nil || body["predefined_voice_id"] != "Emily.wav" || r.Path != "/tts" {
		t.Fatalf("recorded %+v", r)
	}
}

func TestChatterboxOpenAISpeechAndErrors(t *testing.T) {
	c := StartChatterbox(t)
	res := do(t, "POST", c.URL+"/v1/audio/speech", map[string]any{"model": "chatterbox", "input": "Hi", "voice": "Olivia.wav"})
	if res.status != 200 || res.header.Get("Content-Type") != "audio/wav" {
		t.Fatalf("speech %d %v", res.status, res.header)
	}
	checkWAV(t, res.body)
	res = do(t, "POST", c.URL+"/v1/audio/speech", map[string]any{"model": "chatterbox", "input": "Hi", "voice": "nobody.wav", "response_format": "mp3"})
	if res.status != 404 || string(res.body) != `{"detail":"Voice file 'nobody.wav' not found."}` {
		t.Fatalf("unknown voice %d %s", res.status, res.body)
	}

	res = do(t, "POST", c.URL+"/tts", map[string]any{"voice_mode": "loud"})
	var v struct {
		Detail []struct {
			Type string
			Loc  []any
		}
	}
	if err := json.Unmarshal(res.body, &v); err != nil || res.status != 422 || len(v.Detail) != 2 ||
		v.Detail[0].Type != "missing" || v.Detail[0].Loc[1] != "text" || v.Detail[1].Type != "literal_error" {
		t.Fatalf("validation %d %s", res.status, res.body)
	}
	res = do(t, "POST", c.URL+"/tts", map[string]any{"text": "x"})
	if res.status != 400 || string(res.body) != `{"detail":"Missing 'predefined_voice_id' for 'predefined' voice mode."}` {
		t.Fatalf("no voice %d %s", res.status, res.body)
	}
	res = do(t, "POST", c.URL+"/tts", map[string]any{"text": "x", "voice_mode": "clone", "reference_audio_filename": "me.wav"})
	if res.status != 404 {
		t.Fatalf("missing reference %d %s", res.status, res.body)
	}

	// Upload a reference, then clone with it.
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, _ := mw.CreateFormFile("files", "me.wav")
	_, _ = fw.Write(WAV(100))
	fw, _ = mw.CreateFormFile("files", "notes.txt")
	_, _ = fw.Write([]byte("x"))
	_ = mw.Close()
	up := do(t, "POST", c.URL+"/upload_reference", buf.Bytes(), "Content-Type", mw.FormDataContentType())
	got := decode[struct {
		UploadedFiles     []string            `json:"uploaded_files"`
		AllReferenceFiles []string            `json:"all_reference_files"`
		Errors            []map[string]string `json:"errors"`
	}](t, up.body)
	if up.status != 200 || !slices.Equal(got.UploadedFiles, []string{"me.wav"}) || len(got.Errors) != 1 {
		t.Fatalf("upload %d %s", up.status, up.body)
	}
	res = do(t, "POST", c.URL+"/tts", map[string]any{"text": "x", "voice_mode": "clone", "reference_audio_filename": "me.wav", "output_format": "opus"})
	if res.status != 200 || res.header.Get("Content-Type") != "audio/opus" || !bytes.HasPrefix(res.body, []byte("OggS")) {
		t.Fatalf("clone %d %v", res.status, res.header)
	}
	if refs := decode[[]string](t, do(t, "GET", c.URL+"/get_reference_files", nil).body); !slices.Equal(refs, []string{"me.wav"}) {
		t.Fatalf("refs %v", refs)
	}

	voices := decode[[]map[string]string](t, do(t, "GET", c.URL+"/get_predefined_voices", nil).body)
	if len(voices) != 4 || voices[0]["display_name"] != "Abigail" || voices[0]["filename"] != "Abigail.wav" {
		t.Fatalf("voices %v", voices)
	}
	init := decode[map[string]any](t, do(t, "GET", c.URL+"/api/ui/initial-data", nil).body)
	for _, k := range []string{"config", "reference_files", "predefined_voices", "presets", "initial_gen_result", "model_info"} {
		if _, ok := init[k]; !ok {
			t.Fatalf("initial-data lacks %s", k)
		}
	}
	save := do(t, "POST", c.URL+"/save_settings", map[string]any{"generation_defaults": map[string]any{"temperature": 0.5}})
	if save.status != 200 || !strings.Contains(string(save.body), `"restart_needed":false`) {
		t.Fatalf("save %d %s", save.status, save.body)
	}
	cfg := decode[map[string]any](t, do(t, "GET", c.URL+"/api/ui/initial-data", nil).body)["config"].(map[string]any)
	if gd := cfg["generation_defaults"].(map[string]any); gd["temperature"] != 0.5 || gd["exaggeration"] != 0.5 {
		t.Fatalf("merged config %v", gd)
	}

	// Unloading the model makes generation 503 until a reload.
	if res := do(t, "POST", c.URL+"/api/unload", nil); string(res.body) != `{"status":"unloaded"}` {
		t.Fatalf("unload %s", res.body)
	}
	if info := decode[map[string]any](t, do(t, "GET", c.URL+"/api/model-info", nil).body); info["loaded"] != false {
		t.Fatalf("model info %v", info)
	}
	res = do(t, "POST", c.URL+"/tts", map[string]any{"text": "x", "predefined_voice_id": "Emily.wav"})
	if res.status != 503 || string(res.body) != `{"detail":"TTS engine model is not currently loaded or available."}` {
		t.Fatalf("unloaded tts %d %s", res.status, res.body)
	}
	do(t, "POST", c.URL+"/restart_server", nil)
	if !c.Loaded() {
		t.Fatal("not reloaded")
	}
	if res := do(t, "HEAD", c.URL+"/api/model-info", nil); res.status != 405 {
		t.Fatalf("HEAD on a FastAPI GET route: %d", res.status)
	}
}

func TestChatterboxCancelMidStream(t *testing.T) {
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	c := StartChatterbox(t, WithRelease(hold), WithTokens(8))
	ctx, cancel := context.WithCancel(waitCtx(t))
	req, _ := http.NewRequestWithContext(ctx, "POST", c.URL+"/tts", strings.NewReader(`{"text":"a long sentence","predefined_voice_id":"Gabriel.wav"}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 4)
	if _, err := io.ReadFull(resp.Body, head); err != nil || string(head) != "RIFF" {
		t.Fatalf("first chunk %q %v", head, err)
	}
	cancel()
	resp.Body.Close()
	if err := c.WaitCancelled(waitCtx(t), 1); err != nil {
		t.Fatal(err)
	}
	if r, _ := c.Last(); !r.Cancelled || r.Path != "/tts" {
		t.Fatalf("last %+v", r)
	}
}
