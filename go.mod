module github.com/vacancyd/vacancyd

go 1.26.0

require (
	github.com/Microsoft/go-winio v0.6.4 // the Windows admin pipe: Microsoft's named-pipe listener with security descriptors
	github.com/NVIDIA/go-nvml v0.13.4-1 // GPU pressure: NVIDIA's own NVML binding, loaded at run time (no driver = a readiness state)
	github.com/chromedp/chromedp v0.23.0 // tests: drives Debian's headless Chromium for the browser rules
	github.com/coder/websocket v1.8.15 // tests: a real WebSocket client for ComfyUI /ws through a gate
	github.com/fsnotify/fsnotify v1.10.1 // the GPU-pressure state file: directory watch so atomic renames are seen
	github.com/godbus/dbus/v5 v5.2.4 // session reporter: Mutter, ScreenSaver and logind idle APIs over D-Bus
	github.com/jezek/xgb v1.1.1 // session reporter: X11 MIT-SCREEN-SAVER idle time in pure Go (no cgo)
	github.com/ollama/ollama v0.17.4 // tests: Ollama's own Go API client
	github.com/openai/openai-go/v3 v3.98.0 // tests: the official OpenAI Go client
	github.com/pelletier/go-toml/v2 v2.4.3 // config: strict TOML decode that names unknown keys and their lines
	github.com/prometheus/client_golang v1.25.0 // /metrics: Prometheus's own client, Go and process collectors
	golang.org/x/net v0.62.0 // netutil.LimitListener: per-listener connection caps
	golang.org/x/sys v0.49.0 // SO_PEERCRED, openat2, Windows tokens and pipes
)

require (
	github.com/bahlo/generic-list-go v0.2.0 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/buger/jsonparser v1.1.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/chromedp/cdproto v0.159.0 // indirect
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/kylelemons/godebug v1.1.0 // indirect
	github.com/mailru/easyjson v0.7.7 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	github.com/tidwall/gjson v1.20.0 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.1 // indirect
	github.com/tidwall/sjson v1.2.5 // indirect
	github.com/wk8/go-ordered-map/v2 v2.1.8 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
