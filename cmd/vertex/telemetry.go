package main

import (
	"context"
	"io"
	"os"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// newLogger returns a JSON logger on w at level ("debug", "info", "warn", "error").
func newLogger(level string, w io.Writer) (*zap.Logger, error) {
	var lvl zapcore.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("--log-level (%q) must be debug, info, warn or error", level)
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.Lock(zapcore.AddSync(w)), lvl)
	return zap.New(core), nil
}

// newTracer returns a tracer exporting to an OTLP gRPC endpoint, taken from the
// flag or from $OTEL_EXPORTER_OTLP_ENDPOINT; with neither it returns nil: no
// tracing, and no cost per forward iteration.
func newTracer(ctx context.Context, endpoint, vertex string, replica int) (trace.Tracer, func(), error) {
	opts := []otlptracegrpc.Option{}
	switch {
	case endpoint != "":
		opts = append(opts, otlptracegrpc.WithEndpointURL(endpoint))
	case os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "":
	default:
		return nil, func() {}, nil
	}
	exp, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nil, nil, usagef("--otlp-endpoint (%q): %v", endpoint, err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", "sluice-vertex"),
		attribute.String("vertex", vertex), attribute.String("replica", strconv.Itoa(replica)))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	shutdown := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		tp.Shutdown(sctx)
	}
	return tp.Tracer("github.com/sluiceflow/sluice/pkg/forward"), shutdown, nil
}
