package callbacks

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseSchedule(t *testing.T) {
	cases := []struct {
		in      string
		want    Schedule
		wantErr bool
	}{
		{"", DefaultSchedule, false},
		{"1s,2s,4s", Schedule{time.Second, 2 * time.Second, 4 * time.Second}, false},
		{" 500ms , 1m ", Schedule{500 * time.Millisecond, time.Minute}, false},
		{"1s,,2s", nil, true},
		{"soon", nil, true},
		{"-1s", nil, true},
		{"0s", nil, true},
		{"200h", nil, true},
	}
	for _, c := range cases {
		got, err := ParseSchedule(c.in)
		if c.wantErr {
			assert.Error(t, err, c.in)
			continue
		}
		require.NoError(t, err, c.in)
		assert.Equal(t, c.want, got, c.in)
	}
	assert.Equal(t, "5s,5m0s,30m0s,2h0m0s,5h0m0s,10h0m0s,10h0m0s", DefaultSchedule.String())
}

func TestDelayJitterAndExhaustion(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := Schedule{10 * time.Second, time.Minute}
	for i := 0; i < 1000; i++ {
		d, ok := s.Delay(1, rng)
		require.True(t, ok)
		require.GreaterOrEqual(t, d, 10*time.Second)
		require.LessOrEqual(t, d, 11*time.Second)
	}
	d, ok := s.Delay(2, nil)
	assert.True(t, ok)
	assert.Equal(t, time.Minute, d)
	_, ok = s.Delay(3, rng)
	assert.False(t, ok, "after the last retry the delivery is parked")
	_, ok = s.Delay(0, rng)
	assert.False(t, ok)
}
