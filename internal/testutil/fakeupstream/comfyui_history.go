package fakeupstream

// History and files: /history, /view and /upload/image.

import (
	"bytes"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

func (c *ComfyUI) postHistory(w http.ResponseWriter, r *http.Request) {
	data, ok := requestJSON(w, r)
	if !ok {
		return
	}
	c.mu.Lock()
	if clear, _ := data["clear"].(bool); clear {
		c.history = map[string]*comfyHistory{}
		c.histOrder = nil
	}
	if del, ok := data["delete"].([]any); ok {
		for _, d := range del {
			id, _ := d.(string)
			delete(c.history, id)
			c.histOrder = slices.DeleteFunc(c.histOrder, func(h string) bool { return h == id })
		}
	}
	c.mu.Unlock()
	comfyOK(w)
}

func (c *ComfyUI) getHistory(w http.ResponseWriter, r *http.Request) {
	maxItems := -1
	if s := r.URL.Query().Get("max_items"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			aiohttpText(w, http.StatusBadRequest, "max_items must be an integer")
			return
		}
		maxItems = n
	}
	c.mu.Lock()
	ids := c.histOrder
	if maxItems >= 0 && maxItems < len(ids) {
		ids = ids[len(ids)-maxItems:]
	}
	out := map[string]any{}
	for _, id := range ids {
		out[id] = c.history[id]
	}
	c.mu.Unlock()
	comfyJSON(w, http.StatusOK, out)
}

func (c *ComfyUI) getHistoryID(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("prompt_id")
	c.mu.Lock()
	out := map[string]any{}
	if h, ok := c.history[id]; ok {
		out[id] = h
	}
	c.mu.Unlock()
	comfyJSON(w, http.StatusOK, out)
}

func fileKey(typ, subfolder, name string) string { return typ + "\x00" + subfolder + "\x00" + name }

func (c *ComfyUI) view(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !q.Has("filename") {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	name := q.Get("filename")
	if name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, "..") {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	typ := q.Get("type")
	if typ == "" {
		typ = "output"
	}
	if typ != "output" && typ != "input" && typ != "temp" {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if strings.Contains(q.Get("subfolder"), "..") {
		w.WriteHeader(http.StatusForbidden)
		return
	}
	c.mu.Lock()
	b, ok := c.files[fileKey(typ, q.Get("subfolder"), name)]
	c.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	ct := "application/octet-stream"
	if strings.HasSuffix(strings.ToLower(name), ".png") {
		ct = "image/png"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Disposition", `filename="`+name+`"`)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}

func (c *ComfyUI) uploadImage(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseMultipartForm(32 << 20); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	f, hdr, err := r.FormFile("image")
	if err != nil || hdr.Filename == "" {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	defer func(f multipart.File) { _ = f.Close() }(f)
	data, _ := io.ReadAll(f)
	typ := r.FormValue("type")
	if typ == "" {
		typ = "input"
	}
	sub := r.FormValue("subfolder")
	name := hdr.Filename
	if strings.Contains(name, "..") || strings.Contains(sub, "..") || strings.HasPrefix(sub, "/") {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	overwrite := r.FormValue("overwrite")
	c.mu.Lock()
	if overwrite != "true" && overwrite != "1" {
		ext := ""
		base := name
		if i := strings.LastIndex(name, "."); i > 0 {
			base, ext = name[:i], name[i:]
		}
		for i := 1; ; i++ {
			old, exists := c.files[fileKey(typ, sub, name)]
			if !exists || bytes.Equal(old, data) {
				break
			}
			name = fmt.Sprintf("%s (%d)%s", base, i, ext)
		}
	}
	c.files[fileKey(typ, sub, name)] = data
	c.mu.Unlock()
	comfyJSON(w, http.StatusOK, map[string]any{"name": name, "subfolder": sub, "type": typ})
}
