package memstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/events/memstore"
	"github.com/iqdgateway/gateway/events/storetest"
)

func TestStore_contract(t *testing.T) {
	storetest.Run(t, func(*testing.T) events.Store { return memstore.New() })
}

// An append to a subject with wildcards is refused, where JetStream would
// store it under the wildcard's literal name (outside the contract; see the
// package comment).
func TestStore_Append_refusesWildcardSubjects(t *testing.T) {
	s := memstore.New()
	for _, subj := range []string{events.SitePrefix + "*", events.SitePrefix + ">", events.SitePrefix + "a.*.b"} {
		_, err := s.Append(context.Background(), subj, 0, []byte("x"))
		assert.Error(t, err, subj)
		assert.NotErrorIs(t, err, events.ErrConflict, subj)
	}
	last, err := s.LastSeq(context.Background())
	assert.NoError(t, err)
	assert.Zero(t, last)
}
