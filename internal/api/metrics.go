package api

import (
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vacancyd/vacancyd/internal/version"
)

// NewRegistry returns a registry holding the Go runtime and process
// collectors and vacancyd_build_info. It is never the global default
// registry, so tests and embedders get exactly these metrics.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "vacancyd_build_info",
		Help: "Always 1; the labels say which build of vacancyd is running.",
		ConstLabels: prometheus.Labels{
			"version":   version.Version,
			"revision":  version.Revision,
			"goversion": version.GoVersion,
		},
	})
	buildInfo.Set(1)
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfo,
	)
	return reg
}

// metricsHandler serves reg in the Prometheus exposition formats, counting its
// own scrapes on reg.
func metricsHandler(reg *prometheus.Registry, log *slog.Logger) http.Handler {
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      reg,
	})
	return promhttp.InstrumentMetricHandler(reg, h)
}
