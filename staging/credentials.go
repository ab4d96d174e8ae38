package staging

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Transient names in the private root. They exist only while Stage runs.
const (
	stagingHomeName = "staging-home"    // isolated HOME of every git command
	askpassName     = "staging-askpass" // GIT_ASKPASS helper, 0700
	tokenFileName   = "staging-token"   // the credential, 0600
)

// credentials are the transient staging artefacts: an isolated HOME (with an
// empty template directory) and, when a token is configured, the askpass
// helper and the 0600 token file it reads. Nothing else ever holds the token.
type credentials struct {
	home      string
	templates string
	askpass   string // "" when there is no token
	tokenFile string
}

// writeCredentials creates the transient artefacts under root. A leftover from
// an earlier crash makes it fail: Release sweeps them.
func writeCredentials(root, token string) (c *credentials, err error) {
	c = &credentials{home: filepath.Join(root, stagingHomeName)}
	if err := os.Mkdir(c.home, 0o700); err != nil {
		return nil, fmt.Errorf("staging home: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.remove())
		}
	}()
	c.templates = filepath.Join(c.home, "templates")
	if err := os.Mkdir(c.templates, 0o700); err != nil {
		return c, fmt.Errorf("staging templates: %w", err)
	}
	if token == "" {
		return c, nil
	}
	if !validToken(token) {
		return c, errors.New("staging token: must be printable ASCII without spaces, at most 4096 bytes")
	}
	if strings.ContainsAny(root, "'\"\\$` \t\n") {
		return c, fmt.Errorf("private root %q: quote, backslash, dollar, backquote or white space in path", root)
	}
	c.tokenFile = filepath.Join(root, tokenFileName)
	if err := writeExclusive(c.tokenFile, []byte(token), 0o600); err != nil {
		return c, fmt.Errorf("staging token file: %w", err)
	}
	// The helper answers the user name itself and streams the password from
	// the token file: the token is never in an argument or an environment.
	script := "#!/bin/sh\n" +
		"case \"$1\" in\n" +
		"[Uu]sername*) echo x-access-token ;;\n" +
		"*) exec /bin/cat -- '" + c.tokenFile + "' ;;\n" +
		"esac\n"
	c.askpass = filepath.Join(root, askpassName)
	if err := writeExclusive(c.askpass, []byte(script), 0o700); err != nil {
		return c, fmt.Errorf("staging askpass: %w", err)
	}
	return c, nil
}

// remove deletes every transient artefact. It is safe to call twice.
func (c *credentials) remove() error {
	var errs []error
	for _, p := range []string{c.tokenFile, c.askpass} {
		if p == "" {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove %s: %w", p, err))
		}
	}
	if err := os.RemoveAll(c.home); err != nil {
		errs = append(errs, fmt.Errorf("remove %s: %w", c.home, err))
	}
	return errors.Join(errs...)
}

// writeExclusive creates a new file (never through a symlink, never over an
// existing one), writes data, syncs it and closes it. A partial file is removed.
func writeExclusive(path string, data []byte, mode os.FileMode) (err error) {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(mode.Perm()))
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close %s: %w", path, cerr)
		}
		if err != nil {
			os.Remove(path)
		}
	}()
	// The umask may have narrowed the mode: set it exactly.
	if err := f.Chmod(mode.Perm()); err != nil {
		return fmt.Errorf("chmod %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}
