package ledger

import "context"

// ctxMutex is a mutex whose waiters can give up: a site's lock is held for
// a whole append, and a reader must not outlive its request's deadline
// waiting behind an append to a store that does not answer.
type ctxMutex struct{ ch chan struct{} }

func newCtxMutex() ctxMutex { return ctxMutex{ch: make(chan struct{}, 1)} }

// Lock waits for the lock.
func (m ctxMutex) Lock() { m.ch <- struct{}{} }

// Unlock releases it.
func (m ctxMutex) Unlock() { <-m.ch }

// LockCtx waits for the lock until ctx ends.
func (m ctxMutex) LockCtx(ctx context.Context) error {
	select {
	case m.ch <- struct{}{}:
		return nil
	default:
	}
	select {
	case m.ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
