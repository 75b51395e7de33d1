package connections

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
)

// DefaultMaxAge bounds how old a Cache's answer may be: a connection put,
// enabled, disabled or remapped takes effect in every worker within it.
const DefaultMaxAge = 60 * time.Second

// Source is where a Cache reads a property's connections: a *Store.
type Source interface {
	Get(ctx context.Context, propertyID string) ([]Connection, error)
	CountUnmapped(ctx context.Context, propertyID, channel, field, code string) error
}

// Cache answers where a property's changes go from the connections in
// Source, read at most MaxAge ago: one read per property per MaxAge in
// each process, unknown properties included (so a hotel connected now is
// seen within MaxAge). It is the syncer's Connections (syncer.Connections).
// A read that fails is returned, never cached: the change waits on its
// queue rather than go nowhere.
type Cache struct {
	Source Source
	// Config holds the channels: which endpoint a kind goes to.
	Config *config.Config
	MaxAge time.Duration // DefaultMaxAge if zero
	Now    func() time.Time

	mu      sync.Mutex
	entries map[string]entry
	reads   atomic.Int64
}

type entry struct {
	conns []config.Property
	at    time.Time
}

// maxEntries bounds the cache; past it, entries older than MaxAge go.
const maxEntries = 100_000

// Targets lists where a change of kind to a property goes (config.TargetsOf
// over its connections), and false for a property with none in the store.
func (c *Cache) Targets(ctx context.Context, propertyID, kind string) ([]config.Target, bool, error) {
	conns, err := c.connections(ctx, propertyID)
	if err != nil || len(conns) == 0 {
		return nil, false, err
	}
	return config.TargetsOf(c.Config, conns, kind), true, nil
}

// CountUnmapped counts a code met unmapped in the Source.
func (c *Cache) CountUnmapped(ctx context.Context, propertyID, channel, field, code string) error {
	return c.Source.CountUnmapped(ctx, propertyID, channel, field, code)
}

// Reads is how many times the cache read its Source.
func (c *Cache) Reads() int64 { return c.reads.Load() }

func (c *Cache) connections(ctx context.Context, propertyID string) ([]config.Property, error) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[propertyID]
	c.mu.Unlock()
	if ok && now.Sub(e.at) < c.maxAge() {
		return e.conns, nil
	}
	stored, err := c.Source.Get(ctx, propertyID)
	c.reads.Add(1)
	if err != nil {
		return nil, err
	}
	sort.Slice(stored, func(i, j int) bool { return stored[i].Channel < stored[j].Channel })
	conns := make([]config.Property, len(stored))
	for i, s := range stored {
		conns[i] = s.Property
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string]entry{}
	}
	if len(c.entries) >= maxEntries {
		for k, old := range c.entries {
			if now.Sub(old.at) >= c.maxAge() {
				delete(c.entries, k)
			}
		}
	}
	c.entries[propertyID] = entry{conns: conns, at: now}
	return conns, nil
}

func (c *Cache) maxAge() time.Duration {
	if c.MaxAge > 0 {
		return c.MaxAge
	}
	return DefaultMaxAge
}

func (c *Cache) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}
