package client

import (
	"context"
	"time"
)

// ObservePauses has c's Callbacks tell observe of each pause between
// connections instead of waiting it.
func ObservePauses(c *Client, observe func(time.Duration)) {
	c.wait = func(ctx context.Context, d time.Duration) error {
		observe(d)
		return ctx.Err()
	}
}
