package fakeupstream

// The informational routes: model folders (/models), /object_info and
// /system_stats.

import (
	"net/http"
	"slices"
	"sort"
)

var comfyFolders = []string{"checkpoints", "loras", "vae", "text_encoders", "diffusion_models",
	"clip_vision", "style_models", "embeddings", "diffusers", "vae_approx", "controlnet",
	"gligen", "upscale_models", "hypernetworks", "photomaker", "classifiers", "model_patches", "audio_encoders"}

func (c *ComfyUI) modelFolder(w http.ResponseWriter, r *http.Request) {
	folder := r.PathValue("folder")
	if !slices.Contains(comfyFolders, folder) {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	files := []string{}
	switch folder {
	case "checkpoints":
		files = append(files, c.checkpoints...)
	case "vae":
		files = append(files, "sdxl_vae.safetensors")
	}
	comfyJSON(w, http.StatusOK, files)
}

// Node classes the fake knows: class -> (output node, sampler).
var comfyNodes = map[string]struct {
	output, sampler bool
	category        string
	in              map[string]any
	out             []string
}{
	"CheckpointLoaderSimple": {category: "loaders", in: map[string]any{"ckpt_name": nil}, out: []string{"MODEL", "CLIP", "VAE"}},
	"CLIPTextEncode":         {category: "conditioning", in: map[string]any{"text": []any{"STRING", map[string]any{"multiline": true}}, "clip": []any{"CLIP"}}, out: []string{"CONDITIONING"}},
	"EmptyLatentImage": {category: "latent", in: map[string]any{
		"width":      []any{"INT", map[string]any{"default": 512, "min": 16, "max": 16384, "step": 8}},
		"height":     []any{"INT", map[string]any{"default": 512, "min": 16, "max": 16384, "step": 8}},
		"batch_size": []any{"INT", map[string]any{"default": 1, "min": 1, "max": 4096}}}, out: []string{"LATENT"}},
	"KSampler": {sampler: true, category: "sampling", in: map[string]any{
		"model": []any{"MODEL"}, "seed": []any{"INT", map[string]any{"default": 0, "min": 0, "max": 18446744073709551615.0}},
		"steps":        []any{"INT", map[string]any{"default": 20, "min": 1, "max": 10000}},
		"cfg":          []any{"FLOAT", map[string]any{"default": 8.0, "min": 0.0, "max": 100.0}},
		"sampler_name": []any{[]string{"euler", "euler_ancestral", "dpmpp_2m"}},
		"scheduler":    []any{[]string{"normal", "karras", "simple"}},
		"positive":     []any{"CONDITIONING"}, "negative": []any{"CONDITIONING"}, "latent_image": []any{"LATENT"},
		"denoise": []any{"FLOAT", map[string]any{"default": 1.0, "min": 0.0, "max": 1.0}}}, out: []string{"LATENT"}},
	"KSamplerAdvanced": {sampler: true, category: "sampling", in: map[string]any{"model": []any{"MODEL"}}, out: []string{"LATENT"}},
	"VAEDecode":        {category: "latent", in: map[string]any{"samples": []any{"LATENT"}, "vae": []any{"VAE"}}, out: []string{"IMAGE"}},
	"VAEEncode":        {category: "latent", in: map[string]any{"pixels": []any{"IMAGE"}, "vae": []any{"VAE"}}, out: []string{"LATENT"}},
	"LoadImage":        {category: "image", in: map[string]any{"image": []any{[]string{}, map[string]any{"image_upload": true}}}, out: []string{"IMAGE", "MASK"}},
	"SaveImage": {output: true, category: "image", in: map[string]any{"images": []any{"IMAGE"},
		"filename_prefix": []any{"STRING", map[string]any{"default": "ComfyUI"}}}},
	"PreviewImage": {output: true, category: "image", in: map[string]any{"images": []any{"IMAGE"}}},
}

func (c *ComfyUI) objectInfo() map[string]any {
	out := map[string]any{}
	for name, n := range comfyNodes {
		in := map[string]any{}
		var order []string
		for k, v := range n.in {
			if k == "ckpt_name" {
				v = []any{append([]string(nil), c.checkpoints...)}
			}
			in[k] = v
			order = append(order, k)
		}
		sort.Strings(order)
		outs := n.out
		if outs == nil {
			outs = []string{}
		}
		isList := make([]bool, len(outs))
		out[name] = map[string]any{
			"input": map[string]any{"required": in}, "input_order": map[string]any{"required": order},
			"output": outs, "output_is_list": isList, "output_name": outs, "name": name, "display_name": name,
			"description": "", "python_module": "nodes", "category": n.category, "output_node": n.output,
		}
	}
	return out
}

func (c *ComfyUI) systemStats(w http.ResponseWriter, r *http.Request) {
	comfyJSON(w, http.StatusOK, map[string]any{
		"system": map[string]any{
			"os": "posix", "ram_total": int64(67108864000), "ram_free": int64(51539607552),
			"comfyui_version": c.cfg.version, "required_frontend_version": "1.26.13",
			"python_version":  "3.12.3 (main, Aug 14 2025, 17:47:21) [GCC 13.3.0]",
			"pytorch_version": "2.8.0+cu128", "embedded_python": false, "argv": []string{"main.py", "--listen", "127.0.0.1"},
		},
		"devices": []map[string]any{{
			"name": "cuda:0 NVIDIA GeForce RTX 4090 : cudaMallocAsync", "type": "cuda", "index": 0,
			"vram_total": int64(25386352640), "vram_free": int64(24012914688),
			"torch_vram_total": int64(0), "torch_vram_free": int64(0),
		}},
	})
}
