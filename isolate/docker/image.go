package docker

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/awf-project/awf/rootfs"
)

// Image naming. The repository holds rootfs images tagged by the rootfs
// digest; probe images are tagged by their layer digest.
const (
	rootfsRepo        = "awf-rootfs"
	probeRepo         = "awf-probe"
	labelRootfsDigest = "awf.rootfs.digest"
	labelLayerDigest  = "awf.layer.digest"
)

// writeTree writes the tree under root as an uncompressed tar with
// deterministic headers: lexical order, numeric owners only, whole-second
// modification times and no access or change times. Nothing is followed.
func writeTree(ctx context.Context, root string, w io.Writer) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		if !fi.Mode().IsRegular() && !fi.IsDir() && link == "" {
			return fmt.Errorf("%s: unsupported file type %v", rel, fi.Mode().Type())
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			hdr.Name += "/"
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			hdr.Uid, hdr.Gid = int(st.Uid), int(st.Gid)
		}
		hdr.Uname, hdr.Gname = "", ""
		hdr.ModTime = hdr.ModTime.Truncate(time.Second)
		hdr.AccessTime, hdr.ChangeTime = time.Time{}, time.Time{}
		hdr.PAXRecords = nil
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		if fi.Mode().IsRegular() {
			f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW, 0)
			if err != nil {
				return err
			}
			n, err := io.Copy(tw, io.LimitReader(f, fi.Size()))
			f.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
			if n != fi.Size() {
				return fmt.Errorf("%s: changed while being read", rel)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("tar %s: %w", root, err)
	}
	return tw.Close()
}

// treeDigest is the sha256 of writeTree's output: the layer digest Docker
// records for an image imported from it.
func treeDigest(ctx context.Context, root string) (string, error) {
	h := sha256.New()
	bw := bufio.NewWriterSize(h, 1<<20)
	if err := writeTree(ctx, root, bw); err != nil {
		return "", err
	}
	if err := bw.Flush(); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// imageInfo is what the backend checks of an image.
type imageInfo struct {
	ID     string `json:"Id"`
	Config struct {
		Labels map[string]string `json:"Labels"`
	} `json:"Config"`
	RootFS struct {
		Type   string   `json:"Type"`
		Layers []string `json:"Layers"`
	} `json:"RootFS"`
}

// inspectImage returns the image ref, or nil when there is none.
func (e *engine) inspectImage(ctx context.Context, ref string) (*imageInfo, error) {
	var info imageInfo
	err := e.call(ctx, http.MethodGet, "/images/"+url.PathEscape(ref)+"/json", nil, nil, &info)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &info, nil
}

// checkImage verifies that an image holds exactly one layer with the
// expected digest and carries the expected labels.
func checkImage(info *imageInfo, layer string, labels map[string]string) error {
	if len(info.RootFS.Layers) != 1 || info.RootFS.Layers[0] != layer {
		return fmt.Errorf("image %s has layers %v, want exactly [%s]", info.ID, info.RootFS.Layers, layer)
	}
	for k, v := range labels {
		if info.Config.Labels[k] != v {
			return fmt.Errorf("image %s: label %s is %q, want %q", info.ID, k, info.Config.Labels[k], v)
		}
	}
	return nil
}

// importTree imports the tree under root as image repo:tag with labels
// (docker import), then verifies its content against layer.
func (e *engine) importTree(ctx context.Context, root, repo, tag, layer string, labels map[string]string) (string, error) {
	q := url.Values{"fromSrc": {"-"}, "repo": {repo}, "tag": {tag}}
	for k, v := range labels {
		q.Add("changes", fmt.Sprintf("LABEL %s=%s", k, v))
	}
	pr, pw := io.Pipe()
	go func() {
		bw := bufio.NewWriterSize(pw, 1<<20)
		err := writeTree(ctx, root, bw)
		if err == nil {
			err = bw.Flush()
		}
		pw.CloseWithError(err)
	}()
	resp, err := e.request(ctx, http.MethodPost, "/images/create", q, pr, "application/x-tar")
	pr.CloseWithError(errors.New("request finished"))
	if err != nil {
		return "", fmt.Errorf("docker import %s: %w", root, err)
	}
	defer resp.Body.Close()
	// The reply is a stream of JSON progress messages; an error arrives as one.
	dec := json.NewDecoder(io.LimitReader(resp.Body, maxReply))
	for {
		var m struct {
			Status string `json:"status"`
			Error  string `json:"error"`
		}
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			return "", fmt.Errorf("docker import %s: read reply: %w", root, err)
		}
		if m.Error != "" {
			return "", fmt.Errorf("docker import %s: %s", root, m.Error)
		}
	}
	info, err := e.inspectImage(ctx, repo+":"+tag)
	if err != nil {
		return "", err
	}
	if info == nil {
		return "", fmt.Errorf("docker import %s: image %s:%s missing after import", root, repo, tag)
	}
	if err := checkImage(info, layer, labels); err != nil {
		return "", fmt.Errorf("docker import %s: %w", root, err)
	}
	return info.ID, nil
}

// ensureImage returns the id of a verified image of the tree under root,
// importing it when needed. The tag is tag; the image must carry labels and
// hold exactly one layer whose digest equals the tar of the tree. took is
// how long the import took, and 0 when the Engine already had the image.
func (e *engine) ensureImage(ctx context.Context, root, repo, tag string, labels map[string]string) (id string, took time.Duration, err error) {
	layer, err := treeDigest(ctx, root)
	if err != nil {
		return "", 0, err
	}
	labels[labelLayerDigest] = layer
	info, err := e.inspectImage(ctx, repo+":"+tag)
	if err != nil {
		return "", 0, err
	}
	if info != nil {
		if err := checkImage(info, layer, labels); err == nil {
			return info.ID, 0, nil
		}
		// A stale or foreign image under our tag: replace it.
	}
	t0 := time.Now()
	id, err = e.importTree(ctx, root, repo, tag, layer, labels)
	if err != nil {
		return "", 0, err
	}
	return id, max(time.Since(t0), time.Nanosecond), nil
}

// rootfsImage returns the verified image of a rootfs directory: its digest
// is recomputed (rootfs.Verify), the image is tagged by it, and its single
// layer must be exactly the tar of the directory. ref is the image's
// repo:tag; took is as for ensureImage.
func (e *engine) rootfsImage(ctx context.Context, dir string) (id, ref string, took time.Duration, err error) {
	digest, err := rootfs.Verify(ctx, dir, "")
	if err != nil {
		return "", "", 0, err
	}
	tag := strings.TrimPrefix(digest, "sha256:")
	id, took, err = e.ensureImage(ctx, dir, rootfsRepo, tag, map[string]string{labelRootfsDigest: digest})
	return id, rootfsRepo + ":" + tag, took, err
}
