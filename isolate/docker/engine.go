package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// apiVersion is the Engine API version the backend speaks (Docker 20.10).
const apiVersion = "1.41"

// maxReply bounds any JSON reply the backend decodes.
const maxReply = 4 << 20

// engine is a minimal Docker Engine API client that only ever dials a Unix
// socket. It never reads proxy settings or DOCKER_HOST.
type engine struct {
	sock string
	hc   *http.Client
}

// apiError is an Engine reply with a non-2xx status.
type apiError struct {
	Status  int
	Message string
}

func (e *apiError) Error() string { return fmt.Sprintf("engine: HTTP %d: %s", e.Status, e.Message) }

// isNotFound reports whether err is an Engine 404.
func isNotFound(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// removalInProgress reports the Engine's refusal to remove a container
// whose removal another request has already started.
func removalInProgress(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Status == http.StatusConflict && strings.Contains(ae.Message, "already in progress")
}

// checkSocket accepts only an absolute path to an existing Unix socket.
func checkSocket(p string) error {
	if p == "" {
		return errors.New("no socket configured for the Docker Engine (the docker backend talks to the Engine over its Unix socket only)")
	}
	if strings.Contains(p, "://") || !filepath.IsAbs(p) {
		return fmt.Errorf("the Docker socket %q must be an absolute path to a Unix socket; TCP and other schemes are refused", p)
	}
	st, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("the Docker socket %s: %w (is dockerd running?)", p, err)
	}
	if st.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("the Docker socket %s is not a Unix socket", p)
	}
	return nil
}

func newEngine(sock string) *engine {
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		MaxIdleConns:          4,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: 0, // wait is a long poll; every call has a context deadline instead
		DisableCompression:    true,
	}
	return &engine{sock: sock, hc: &http.Client{Transport: tr}}
}

// request sends one API call. body may be nil; ctype is its content type.
func (e *engine) request(ctx context.Context, method, path string, q url.Values, body io.Reader, ctype string) (*http.Response, error) {
	if err := checkSocket(e.sock); err != nil {
		return nil, err
	}
	u := "http://docker/v" + apiVersion + path
	if path == "/_ping" || path == "/version" {
		u = "http://docker" + path
	}
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("engine: %s %s: %w", method, path, err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("engine: %s %s: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		return nil, replyError(resp, method, path)
	}
	return resp, nil
}

// replyError reads the Engine's error reply into an apiError.
func replyError(resp *http.Response, method, path string) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var m struct {
		Message string `json:"message"`
	}
	msg := strings.TrimSpace(string(b))
	if json.Unmarshal(b, &m) == nil && m.Message != "" {
		msg = m.Message
	}
	return &apiError{Status: resp.StatusCode, Message: fmt.Sprintf("%s %s: %s", method, path, msg)}
}

// call sends a JSON body (when in is not nil) and decodes a JSON reply into
// out (when out is not nil).
func (e *engine) call(ctx context.Context, method, path string, q url.Values, in, out any) error {
	var body io.Reader
	ctype := ""
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("engine: encode %s: %w", path, err)
		}
		body, ctype = bytes.NewReader(b), "application/json"
	}
	resp, err := e.request(ctx, method, path, q, body, ctype)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxReply))
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxReply)).Decode(out); err != nil {
		return fmt.Errorf("engine: decode %s reply: %w", path, err)
	}
	return nil
}

// version checks that the Engine speaks apiVersion.
func (e *engine) version(ctx context.Context) (string, error) {
	var v struct {
		Version       string `json:"Version"`
		APIVersion    string `json:"ApiVersion"`
		MinAPIVersion string `json:"MinAPIVersion"`
	}
	if err := e.call(ctx, http.MethodGet, "/version", nil, nil, &v); err != nil {
		return "", err
	}
	if cmpVersion(v.APIVersion, apiVersion) < 0 || (v.MinAPIVersion != "" && cmpVersion(v.MinAPIVersion, apiVersion) > 0) {
		return v.Version, fmt.Errorf("engine %s speaks API %s..%s, the backend needs %s", v.Version, v.MinAPIVersion, v.APIVersion, apiVersion)
	}
	return v.Version, nil
}

// cmpVersion compares dotted API versions numerically.
func cmpVersion(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) || i < len(bs); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

// attach opens the attach stream of container id (stdout and stderr,
// multiplexed as the logs endpoint frames them) and returns its reader. The
// Engine hands over the connection (101 Switching Protocols); the caller
// owns it from then on, beyond ctx, and must close it.
func (e *engine) attach(ctx context.Context, id string) (io.ReadCloser, error) {
	if err := checkSocket(e.sock); err != nil {
		return nil, err
	}
	q := url.Values{"stream": {"1"}, "stdout": {"1"}, "stderr": {"1"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://docker/v"+apiVersion+"/containers/"+id+"/attach?"+q.Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("engine: attach: %w", err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "tcp")
	resp, err := e.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("engine: attach: %w", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		// A plain reply would stay tied to ctx, which ends before the
		// container does: refuse it rather than cut the capture short.
		defer resp.Body.Close()
		if resp.StatusCode < 300 {
			return nil, fmt.Errorf("engine: attach: the Engine answered HTTP %d, not 101: it did not hand over the stream", resp.StatusCode)
		}
		return nil, replyError(resp, http.MethodPost, "/containers/"+id+"/attach")
	}
	return resp.Body, nil
}
