// Package benchkit is the harness of fleetbucket's benchmarks: it meters
// what a DynamoDB client sends and what DynamoDB would bill for it, runs a
// fleet of workers on one bucket for a fixed time, and connects to the local
// stack without a testing.TB, so that the benchmarks (test/bench,
// test/benchcompare) and programs (the seed figure) all measure the same
// way. Every number it produces is meant to be read as a ratio within one
// run: calls per grant, grants per allowed token.
package benchkit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// ErrNoStack says the local stack's endpoints are not in the environment.
var ErrNoStack = errors.New(`local stack not configured: run eval "$(scripts/localstack.sh start)" first, or use scripts/bench.sh`)

// Config is an AWS config for the local stack, or for an endpoint the user
// brings (emulator.PrefixEnv). It fails with ErrNoStack when neither is
// configured, so that a benchmark never runs against real AWS by accident.
func Config(ctx context.Context) (aws.Config, error) {
	cfg, err := emulator.Load(ctx)
	if errors.Is(err, emulator.ErrNotConfigured) {
		return aws.Config{}, ErrNoStack
	}
	return cfg, err
}

// NewTable creates a limiter table named prefix-<random> (after the run's
// emulator.Prefix) and returns its name and a function that deletes it.
func NewTable(ctx context.Context, db *dynamodb.Client, prefix string) (string, func(), error) {
	name := emulator.Name(prefix, 255)
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := limiter.CreateTable(cctx, db, name); err != nil {
		return "", nil, fmt.Errorf("create table %s: %w", name, err)
	}
	drop := func() {
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &name})
	}
	return name, drop, nil
}
