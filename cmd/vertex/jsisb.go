package main

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/config"
)

func newJetStreamISB(ctx context.Context, p *config.Pipeline, log *zap.Logger) (isbBackend, error) {
	return nil, errors.New("jetstream: not yet")
}

func resetJetStreamBuffers(ctx context.Context, p *config.Pipeline, log *zap.Logger) error {
	return errors.New("jetstream: not yet")
}
