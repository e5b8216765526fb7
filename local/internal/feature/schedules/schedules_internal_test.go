package schedules

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/upstash/box-go/local/internal/errdefs"
)

func TestParseCron(t *testing.T) {
	now := time.Date(2030, 1, 1, 10, 17, 42, 0, time.UTC)
	for _, tc := range []struct {
		expr string
		next time.Time
	}{
		{"* * * * *", time.Date(2030, 1, 1, 10, 18, 0, 0, time.UTC)},
		{"*/5 * * * *", time.Date(2030, 1, 1, 10, 20, 0, 0, time.UTC)},
		{"0 9 * * MON-FRI", time.Date(2030, 1, 2, 9, 0, 0, 0, time.UTC)}, // 1 Jan 2030 is a Tuesday
		{"@hourly", time.Date(2030, 1, 1, 11, 0, 0, 0, time.UTC)},
		{" @daily ", time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)},
		{"0 0 29 2 *", time.Date(2032, 2, 29, 0, 0, 0, 0, time.UTC)},
	} {
		c, err := parseCron(tc.expr, now)
		if err != nil {
			t.Errorf("%q: %v", tc.expr, err)
			continue
		}
		// A time in another zone gives the same UTC activation.
		if got := c.Next(now.In(time.FixedZone("X", 5*3600))); !got.Equal(tc.next) {
			t.Errorf("%q: next %v, want %v", tc.expr, got, tc.next)
		}
	}
	for _, expr := range []string{"", "* * * *", "TZ=UTC * * * * *", "CRON_TZ=UTC * * * * *", "TZ=UTC", "@every 1m", "0 0 31 4 *", "@reboot"} {
		if _, err := parseCron(expr, now); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%q: %v; want an invalid argument", expr, err)
		}
	}
}

func TestLastBytes(t *testing.T) {
	l := &lastBytes{max: 4}
	_, _ = l.Write([]byte("ab"))
	if l.String() != "ab" {
		t.Errorf("short = %q", l.String())
	}
	_, _ = l.Write([]byte("cdef"))
	if got := l.String(); !strings.HasSuffix(got, "\ncdef") || !strings.HasPrefix(got, "[output cut") {
		t.Errorf("cut = %q", got)
	}
}
