package storetest_test

import (
	"context"

	"testing"

	"github.com/zaelimiter/limiter/memorystore"
	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/storetest"
)

// minimal is a backend with the required contract only: it hides every
// optional capability of the store it wraps, as an outside backend that
// implements nothing more would.
type minimal struct{ r store.Repository }

var _ store.Repository = minimal{}

func (m minimal) Name() string { return "minimal" }

func (m minimal) CreateEntity(ctx context.Context, e store.Entity) error {
	return m.r.CreateEntity(ctx, e)
}

func (m minimal) GetEntity(ctx context.Context, id string) (store.Entity, error) {
	return m.r.GetEntity(ctx, id)
}

func (m minimal) DeleteEntity(ctx context.Context, id string) (int, error) {
	return m.r.DeleteEntity(ctx, id)
}

func (m minimal) Children(ctx context.Context, parentID string) ([]store.Entity, error) {
	return m.r.Children(ctx, parentID)
}

func (m minimal) LoadConfigs(ctx context.Context, keys []store.ConfigKey) (map[store.ConfigKey]store.Config, error) {
	return m.r.LoadConfigs(ctx, keys)
}

func (m minimal) GetConfig(ctx context.Context, key store.ConfigKey) (store.Config, bool, error) {
	return m.r.GetConfig(ctx, key)
}

func (m minimal) PutConfig(ctx context.Context, key store.ConfigKey, c store.Config) error {
	return m.r.PutConfig(ctx, key, c)
}

func (m minimal) DeleteConfig(ctx context.Context, key store.ConfigKey) (bool, error) {
	return m.r.DeleteConfig(ctx, key)
}

func (m minimal) LoadBuckets(ctx context.Context, ids []string, keys []store.BucketKey) (map[string]store.Entity, map[store.BucketKey]*store.Bucket, error) {
	return m.r.LoadBuckets(ctx, ids, keys)
}

func (m minimal) GetBucket(ctx context.Context, key store.BucketKey) (*store.Bucket, error) {
	return m.r.GetBucket(ctx, key)
}

func (m minimal) WriteBuckets(ctx context.Context, writes []store.BucketWrite) error {
	return m.r.WriteBuckets(ctx, writes)
}

// TestMinimalBackend: a backend written outside package limiter with the
// required contract only compiles against it and passes the suite (its
// speculative, audit and listing checks are skipped).
func TestMinimalBackend(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Repository { return minimal{memorystore.New()} })
}
