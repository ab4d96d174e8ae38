package apiproxy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/awf-project/awf/tests/fakeprovider"
)

// BenchmarkProxyOverhead measures, in the same run and interleaved, one
// Chat Completions request sent directly to the fake provider (TLS,
// keep-alive) and one sent through the proxy process (plain HTTP on
// loopback, then TLS upstream), and reports the median and p99 of each, the
// proxy's added median and p99, and the proxy process's resident set after
// the run (VmRSS) and at its peak (VmHWM).
func BenchmarkProxyOverhead(b *testing.B) {
	fake := fakeprovider.New(b)
	lim := defaultLimits()
	lim.MaxRequests = 1 << 30
	p, _ := startProcess(b, fake, &lim, nil)
	body := fakeprovider.OpenAIRequest(openAIModel, 64)
	direct := fake.Client()
	viaProxy := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	send := func(c *http.Client, url, auth string) time.Duration {
		fake.Push(fakeprovider.Turn{Kind: fakeprovider.Finish})
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		require.NoError(b, err)
		req.Header.Set("Authorization", "Bearer "+auth)
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := c.Do(req)
		require.NoError(b, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		d := time.Since(start)
		require.Equal(b, http.StatusOK, resp.StatusCode)
		return d
	}
	// Warm both paths' connections first.
	send(direct, fake.URL()+OpenAI.Path(), "direct")
	send(viaProxy, "http://"+p.Addr+OpenAI.Path(), p.AgentToken)
	var d, v []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d = append(d, send(direct, fake.URL()+OpenAI.Path(), "direct"))
		v = append(v, send(viaProxy, "http://"+p.Addr+OpenAI.Path(), p.AgentToken))
	}
	b.StopTimer()
	rss, hwm := procMemKiB(b, p.Pid())
	dp50, dp99 := quantiles(d)
	vp50, vp99 := quantiles(v)
	us := func(x time.Duration) float64 { return float64(x.Nanoseconds()) / 1e3 }
	b.ReportMetric(us(dp50), "direct-p50-µs")
	b.ReportMetric(us(dp99), "direct-p99-µs")
	b.ReportMetric(us(vp50), "proxy-p50-µs")
	b.ReportMetric(us(vp99), "proxy-p99-µs")
	b.ReportMetric(us(vp50-dp50), "overhead-p50-µs")
	b.ReportMetric(us(vp99-dp99), "overhead-p99-µs")
	b.ReportMetric(float64(rss), "proxy-rss-KiB")
	b.ReportMetric(float64(hwm), "proxy-peak-rss-KiB")
	b.ReportMetric(0, "ns/op")
}

// quantiles returns the median and the 99th percentile (nearest rank).
func quantiles(xs []time.Duration) (time.Duration, time.Duration) {
	s := append([]time.Duration(nil), xs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := func(q float64) time.Duration {
		i := int(q*float64(len(s))+0.999999) - 1
		if i < 0 {
			i = 0
		}
		return s[i]
	}
	return rank(0.5), rank(0.99)
}

// procMemKiB reads VmRSS and VmHWM of pid.
func procMemKiB(b *testing.B, pid int) (rss, hwm int64) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(b, err)
	for _, l := range strings.Split(string(raw), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		n, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = n
		case "VmHWM:":
			hwm = n
		}
	}
	return rss, hwm
}
