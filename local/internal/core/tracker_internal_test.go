package core

import (
	"context"
	"testing"
	"time"
)

// TestFeatureHostTracksItsGoroutines: a feature's Go runs its goroutine
// with boxd's lifetime, Wait returns once that goroutine has ended and
// then refuses new ones; boxd's close waits for every feature's goroutines
// and then refuses theirs too.
func TestFeatureHostTracksItsGoroutines(t *testing.T) {
	type key struct{}
	life := context.WithValue(t.Context(), key{}, "boxd")
	c := New(Config{Context: life})
	h, other := c.NewFeatureHost(), c.NewFeatureHost()

	release, started := make(chan struct{}), make(chan context.Context, 1)
	if !h.Go(func(ctx context.Context) { started <- ctx; <-release }) {
		t.Fatal("Go refused an open host")
	}
	if ctx := <-started; ctx.Value(key{}) != "boxd" {
		t.Error("the goroutine's context is not boxd's lifetime")
	}
	waited := make(chan struct{})
	go func() { h.Wait(); close(waited) }()
	select {
	case <-waited:
		t.Fatal("Wait returned while the goroutine ran")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	<-waited
	if h.Go(func(context.Context) { t.Error("a goroutine ran after Wait") }) {
		t.Error("Go after Wait did not refuse")
	}

	release = make(chan struct{})
	if !other.Go(func(context.Context) { <-release }) {
		t.Fatal("Go refused another feature's open host")
	}
	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("boxd's close returned while a feature's goroutine ran")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	<-closed
	if other.Go(func(context.Context) { t.Error("a goroutine ran after boxd's close") }) {
		t.Error("Go after boxd's close did not refuse")
	}
}
