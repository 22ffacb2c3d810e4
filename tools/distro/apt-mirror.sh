# SPDX-License-Identifier: GPL-2.0
# Sourced, not run. apt_mirror prints the Debian mirror this host's own apt
# uses, for the scripts that debootstrap a Debian root (debian-kdir.sh,
# build-debian-root.sh, build-dom0-rootfs.sh) and for setup-host.sh's
# trixie-backports entry: they fetch from wherever the host is set up to
# (its mirror, proxy or local copy) rather than from a host name written
# into the repository. Callers keep DISTRO_MIRROR as the override:
#
#   MIRROR=${DISTRO_MIRROR:-$(apt_mirror)} || exit 1
#
# The sources are read in apt's order: sources.list, then sources.list.d's
# *.list and *.sources by name (paths from apt-config, so APT_CONFIG and
# Dir::Etc are honoured); FILE arguments replace them. Both formats count:
# one-line `deb [options] URI SUITE COMPONENT...` and deb822 stanzas
# (Types/URIs/Suites, Enabled: no skipped). The first `deb` entry that is
# Debian's main archive wins: its URI's last path component is `debian`
# (not debian-security, nor another vendor's repository) and one of its
# suites is a release (a name without a -security, -updates or -backports
# part), so an entry listing only trixie-backports or a security suite is
# never taken. A mirror+file: URI stands for the first URI of the file it
# names (Debian's cloud images). The URI is printed without a trailing /.
# With none: a one-line error on stderr, status 1.
#
#   apt_mirror [FILE...]
apt_mirror() {
    local files=() sl sld f m
    if (($#)); then
        files=("$@")
    else
        eval "$(apt-config shell sl Dir::Etc::sourcelist/f sld Dir::Etc::sourceparts/d 2>/dev/null)"
        sl=${sl:-/etc/apt/sources.list} sld=${sld:-/etc/apt/sources.list.d/}
        [ -f "$sl" ] && files+=("$sl")
        for f in "${sld%/}"/*; do
            case $f in *.list | *.sources) [ -f "$f" ] && files+=("$f") ;; esac
        done
    fi
    m=$( ((${#files[@]})) && awk '
        # URI when it is the Debian main archive, serving a release among SUITES.
        function debian(uri, suites,   mf, line, n, s, i) {
            if (uri ~ /^mirror\+file:/) {
                mf = uri; sub(/^mirror\+file:(\/\/)?/, "", mf); uri = ""
                while (uri == "" && (getline line < mf) > 0) {
                    sub(/#.*/, "", line); sub(/^[ \t]+/, "", line); sub(/[ \t].*/, "", line)
                    uri = line
                }
                close(mf)
            }
            sub(/\/+$/, "", uri)
            if (uri !~ /^[a-z+]+:.*\/debian$/) return ""
            n = split(suites, s, /[ \t]+/)
            for (i = 1; i <= n; i++)
                if (s[i] ~ /^[a-z]+$/) return uri
            return ""
        }
        function found(uri) { print uri; done = 1; exit }
        # The deb822 stanza read so far, then a fresh one.
        function stanza(   n, u, i) {
            if ((" " types " ") ~ / deb / && enabled != "no") {
                n = split(uris, u, /[ \t]+/)
                for (i = 1; i <= n; i++)
                    if (debian(u[i], suites) != "") found(debian(u[i], suites))
            }
            types = uris = suites = enabled = ""
        }
        FNR == 1 { stanza(); deb822 = (FILENAME ~ /\.sources$/) }
        deb822 {
            if ($0 ~ /^[ \t]*$/) { stanza(); next }
            if ($0 ~ /^#/ || $0 ~ /^[ \t]/ || $0 !~ /:/) next  # comments, continuation lines
            k = v = $0
            sub(/:.*/, "", k); k = tolower(k)
            sub(/^[^:]*:[ \t]*/, "", v); sub(/[ \t]+$/, "", v)
            if (k == "types") types = v
            else if (k == "uris") uris = v
            else if (k == "suites") suites = v
            else if (k == "enabled") enabled = tolower(v)
            next
        }
        {   # one-line: deb [options] URI SUITE COMPONENT...
            line = $0
            sub(/#.*/, "", line); gsub(/\[[^]]*\]/, " ", line); sub(/^[ \t]+/, "", line)
            if (split(line, w, /[ \t]+/) >= 3 && w[1] == "deb" && debian(w[2], w[3]) != "")
                found(debian(w[2], w[3]))
        }
        END { if (!done) stanza() }
    ' "${files[@]}")
    if [ -z "$m" ]; then
        echo "error: no Debian archive mirror in apt's sources (${files[*]:-no sources files}): set DISTRO_MIRROR=URI" >&2
        return 1
    fi
    echo "$m"
}
