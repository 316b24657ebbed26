/* Stand-in for NVIDIA pyxis: accepts the --container-* options of srun/sbatch/salloc and, for a
 * step with --container-image, really enters an "image" so that an unmounted host path fails as
 * it would on a cluster.
 *
 * Each option given is exported to the job's tasks as FAKE_PYXIS_<OPTION> (e.g.
 * FAKE_PYXIS_CONTAINER_IMAGE) so tests can assert on it.
 *
 * An image is a directory IMAGES/<name>/ made by tests/cluster/make-image.sh: rootfs/ (the image's
 * own files: mount points, symlinks, small files) and os-binds (host paths bound read-only into
 * the root: they stand for the image's OS, e.g. /usr with python3) and hide (files of those host
 * paths the image does not have, e.g. the Slurm client). IMAGES is the plugin argument
 * images=DIR in plugstack.conf, else ../images next to this .so. <name> is the --container-image
 * value with every character outside [A-Za-z0-9._-] replaced by '_'; an absolute path names the
 * image directory itself. An unknown image fails the step, as a failed import does in pyxis.
 *
 * Per task (slurm_spank_task_init_privileged, in the forked task before exec, as root): a private
 * mount namespace, a tmpfs root (so writes to the image vanish with the task), rootfs/ and the
 * os-binds in it, /dev, /proc, /sys, a private /tmp, the --container-mounts (SRC[:DST[:FLAGS]],
 * comma-separated, FLAGS '+'-separated, ro/rw honoured), $HOME only with --container-mount-home
 * (enroot's default is not to mount it), then chroot. The working directory is set in
 * slurm_spank_task_init (as pyxis does): --container-workdir, else the image's default "/".
 * Errors are printed on the task's stderr there ("pyxis: ...") and the task exits 1.
 * Steps without --container-image are untouched. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>
#include <slurm/slurm.h>
#include <slurm/spank.h>

SPANK_PLUGIN(fake_pyxis, 1);

static int cb(int val, const char *optarg, int remote);

static struct spank_option opts[] = {
    { "container-image", "[USER@][REGISTRY#]IMAGE[:TAG]|PATH", "[fake pyxis] image directory to enter", 1, 0, cb },
    { "container-mounts", "SRC:DST[:FLAGS][,SRC:DST...]", "[fake pyxis] bind mount[s] inside the container", 1, 1, cb },
    { "container-workdir", "PATH", "[fake pyxis] working directory inside the container", 1, 2, cb },
    { "container-name", "NAME", "[fake pyxis] ignored", 1, 3, cb },
    { "container-save", "PATH", "[fake pyxis] ignored", 1, 4, cb },
    { "container-mount-home", NULL, "[fake pyxis] bind mount the user's home directory", 0, 5, cb },
    { "no-container-mount-home", NULL, "[fake pyxis] do not bind mount the home directory (default)", 0, 6, cb },
    { "container-remap-root", NULL, "[fake pyxis] ignored", 0, 7, cb },
    { "no-container-remap-root", NULL, "[fake pyxis] ignored", 0, 8, cb },
    { "container-entrypoint", NULL, "[fake pyxis] ignored", 0, 9, cb },
    { "no-container-entrypoint", NULL, "[fake pyxis] ignored", 0, 10, cb },
    { "container-entrypoint-log", NULL, "[fake pyxis] ignored", 0, 11, cb },
    { "container-writable", NULL, "[fake pyxis] ignored (the root is always a throwaway tmpfs)", 0, 12, cb },
    { "container-readonly", NULL, "[fake pyxis] ignored", 0, 13, cb },
    { "container-env", "NAME[,NAME...]", "[fake pyxis] ignored (the image sets no environment)", 1, 14, cb },
    SPANK_OPTIONS_TABLE_END
};
#define NOPTS 15
enum { O_IMAGE = 0, O_MOUNTS = 1, O_WORKDIR = 2, O_MOUNT_HOME = 5 };
static char *vals[NOPTS];
static char images_dir[PATH_MAX];
/* set by task_init_privileged, reported by task_init once the task's stderr is its own */
static char pending_error[1024];
static int entered;

static int cb(int val, const char *optarg, int remote)
{
    if (val < 0 || val >= NOPTS)
        return -1;
    free(vals[val]);
    vals[val] = strdup((optarg && *optarg) ? optarg : "1");
    return 0;
}

static void set_images_dir(int ac, char **av)
{
    Dl_info info;
    for (int i = 0; i < ac; i++)
        if (strncmp(av[i], "images=", 7) == 0) {
            snprintf(images_dir, sizeof(images_dir), "%s", av[i] + 7);
            return;
        }
    /* default: DIR/images for DIR/spank/fake_pyxis.so, so the running cluster's plugstack.conf
     * needs no change */
    if (dladdr((void *) set_images_dir, &info) && info.dli_fname) {
        char so[PATH_MAX];
        char guess[PATH_MAX];
        snprintf(so, sizeof(so), "%s", info.dli_fname);
        snprintf(guess, sizeof(guess), "%s/../images", dirname(so));
        if (!realpath(guess, images_dir))
            snprintf(images_dir, sizeof(images_dir), "%s", guess);
    }
}

/* register from slurm_spank_init (as pyxis does): an exported spank_options table is
 * honoured by srun but not by sbatch/salloc ("sbatch: unrecognized option") */
int slurm_spank_init(spank_t sp, int ac, char **av)
{
    set_images_dir(ac, av);
    for (int i = 0; i < NOPTS; i++)
        if (spank_option_register(sp, &opts[i]) != ESPANK_SUCCESS)
            return -1;
    return 0;
}

int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
    for (int i = 0; i < NOPTS; i++) {
        char name[128] = "FAKE_PYXIS_";
        size_t n = strlen(name);
        if (!vals[i])
            continue;
        for (const char *p = opts[i].name; *p && n < sizeof(name) - 1; p++)
            name[n++] = (*p == '-') ? '_' : (char) toupper((unsigned char) *p);
        name[n] = '\0';
        spank_setenv(sp, name, vals[i], 1);
    }
    return 0;
}

static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pending_error, sizeof(pending_error), fmt, ap);
    va_end(ap);
    return -1;
}

static int mkdirs(const char *path, mode_t mode)
{
    char buf[PATH_MAX];
    snprintf(buf, sizeof(buf), "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, mode) < 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return (mkdir(buf, mode) < 0 && errno != EEXIST) ? -1 : 0;
}

/* a mount target: a directory for a directory source, an empty file otherwise (enroot's
 * x-create=auto) */
static int make_target(const char *target, const char *source)
{
    struct stat st;
    char parent[PATH_MAX];
    int fd;
    if (stat(source, &st) < 0 || S_ISDIR(st.st_mode))
        return mkdirs(target, 0755);
    snprintf(parent, sizeof(parent), "%s", target);
    if (mkdirs(dirname(parent), 0755) < 0)
        return -1;
    fd = open(target, O_CREAT | O_WRONLY, 0644);
    if (fd < 0)
        return errno == EEXIST ? 0 : -1;
    close(fd);
    return 0;
}

static int bind_into(const char *root, const char *source, const char *target, int readonly)
{
    char dst[PATH_MAX];
    struct stat st;
    snprintf(dst, sizeof(dst), "%s%s", root, target);
    if (stat(source, &st) < 0)
        return fail("could not mount %s: %s (no such path on the node)", source, strerror(errno));
    if (make_target(dst, source) < 0)
        return fail("could not create mount point %s in the container: %s", target, strerror(errno));
    if (mount(source, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
        return fail("could not mount %s at %s: %s", source, target, strerror(errno));
    if (readonly && mount(NULL, dst, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) < 0)
        return fail("could not make %s read-only: %s", target, strerror(errno));
    return 0;
}

/* the image's own top-level files: directories are bound (read-only), symlinks recreated */
static int populate_rootfs(const char *root, const char *rootfs)
{
    DIR *d = opendir(rootfs);
    struct dirent *e;
    int rv = 0;
    if (!d)
        return fail("image has no rootfs directory %s: %s", rootfs, strerror(errno));
    while (rv == 0 && (e = readdir(d))) {
        char src[PATH_MAX], dst[PATH_MAX], link[PATH_MAX];
        struct stat st;
        ssize_t n;
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(src, sizeof(src), "%s/%s", rootfs, e->d_name);
        snprintf(dst, sizeof(dst), "%s/%s", root, e->d_name);
        if (lstat(src, &st) < 0)
            continue;
        if (S_ISLNK(st.st_mode)) {
            n = readlink(src, link, sizeof(link) - 1);
            if (n < 0)
                continue;
            link[n] = '\0';
            if (symlink(link, dst) < 0 && errno != EEXIST)
                rv = fail("could not copy symlink /%s from the image: %s", e->d_name, strerror(errno));
        } else if (S_ISDIR(st.st_mode)) {
            char target[PATH_MAX];
            snprintf(target, sizeof(target), "/%s", e->d_name);
            rv = bind_into(root, src, target, 1);
        }
    }
    closedir(d);
    return rv;
}

static int bind_os(const char *root, const char *list)
{
    FILE *f = fopen(list, "r");
    char line[PATH_MAX];
    int rv = 0;
    if (!f)
        return 0;
    while (rv == 0 && fgets(line, sizeof(line), f)) {
        struct stat st;
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] != '/' || lstat(line, &st) < 0 || S_ISLNK(st.st_mode))
            continue;  /* merged-/usr symlinks come from rootfs/ */
        rv = bind_into(root, line, line, 1);
    }
    fclose(f);
    return rv;
}

/* paths of the host OS the image does not have (the Slurm client: NGC images ship none, and a
 * client without its slurm.conf hangs ~60 s in DNS lookups): an empty mode-000 file on top */
static int hide_paths(const char *root, const char *list)
{
    FILE *f = fopen(list, "r");
    char line[PATH_MAX], empty[PATH_MAX], dst[PATH_MAX];
    int fd, rv = 0;
    if (!f)
        return 0;
    snprintf(empty, sizeof(empty), "%s/.fake-pyxis-hidden", root);
    fd = open(empty, O_CREAT | O_WRONLY, 0);
    if (fd >= 0)
        close(fd);
    while (rv == 0 && fgets(line, sizeof(line), f)) {
        struct stat st;
        line[strcspn(line, "\r\n")] = '\0';
        snprintf(dst, sizeof(dst), "%s%s", root, line);
        if (line[0] != '/' || stat(dst, &st) < 0 || !S_ISREG(st.st_mode))
            continue;
        if (mount(empty, dst, NULL, MS_BIND, NULL) < 0)
            rv = fail("could not hide %s in the image: %s", line, strerror(errno));
    }
    fclose(f);
    return rv;
}

/* --container-mounts: SRC[:DST[:FLAGS]][,...]; FLAGS '+'-separated as in pyxis */
static int bind_mounts(const char *root, const char *spec)
{
    char *copy = strdup(spec), *rest = copy, *entry;
    int rv = 0;
    while (rv == 0 && (entry = strsep(&rest, ","))) {
        char *src, *dst, *flags;
        int readonly = 0;
        if (!*entry)
            continue;
        src = strsep(&entry, ":");
        dst = entry ? strsep(&entry, ":") : NULL;
        flags = entry;
        if (!dst || !*dst)
            dst = src;
        if (src[0] != '/' || dst[0] != '/') {
            rv = fail("--container-mounts: %s:%s: the fake pyxis takes absolute paths only", src, dst);
            break;
        }
        for (char *fl = flags ? strtok(flags, "+") : NULL; fl; fl = strtok(NULL, "+"))
            readonly = strcmp(fl, "ro") == 0 ? 1 : strcmp(fl, "rw") == 0 ? 0 : readonly;
        rv = bind_into(root, src, dst, readonly);
    }
    free(copy);
    return rv;
}

/* sbatch --container-image runs the batch script in the image (as pyxis does): the script, in
 * slurmd's spool directory, is bound at its own path */
static int bind_batch_script(spank_t sp, const char *root)
{
    uint32_t stepid = 0;
    int argc = 0;
    char **argv = NULL;
    if (spank_get_item(sp, S_JOB_STEPID, &stepid) != ESPANK_SUCCESS || stepid != SLURM_BATCH_SCRIPT)
        return 0;
    if (spank_get_item(sp, S_JOB_ARGV, &argc, &argv) != ESPANK_SUCCESS || argc < 1)
        return fail("couldn't get the sbatch script");
    return bind_into(root, argv[0], argv[0], 1);
}

static int image_path(char *out, size_t len, const char *image)
{
    struct stat st;
    if (image[0] == '/') {
        snprintf(out, len, "%s", image);
    } else {
        char name[256];
        size_t i;
        for (i = 0; image[i] && i < sizeof(name) - 1; i++)
            name[i] = (isalnum((unsigned char) image[i]) || strchr("._-", image[i])) ? image[i] : '_';
        name[i] = '\0';
        snprintf(out, len, "%s/%s", images_dir, name);
    }
    if (stat(out, &st) < 0 || !S_ISDIR(st.st_mode))
        return fail("failed to import docker image %s: no such image (fake pyxis: images are "
                    "directories under %s, made by tests/cluster/make-image.sh)", image, images_dir);
    return 0;
}

static int enter_container(spank_t sp)
{
    char image[PATH_MAX], root[PATH_MAX], sub[PATH_MAX], home[PATH_MAX];
    if (image_path(image, sizeof(image), vals[O_IMAGE]) < 0)
        return -1;
    snprintf(root, sizeof(root), "%s/.root", images_dir);
    if (mkdirs(root, 0755) < 0)
        return fail("could not create %s: %s", root, strerror(errno));
    if (unshare(CLONE_NEWNS) < 0)
        return fail("could not create a mount namespace: %s", strerror(errno));
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return fail("could not make / private: %s", strerror(errno));
    if (mount("tmpfs", root, "tmpfs", 0, "mode=755") < 0)
        return fail("could not mount the container root: %s", strerror(errno));
    snprintf(sub, sizeof(sub), "%s/rootfs", image);
    if (populate_rootfs(root, sub) < 0)
        return -1;
    snprintf(sub, sizeof(sub), "%s/os-binds", image);
    if (bind_os(root, sub) < 0 || bind_into(root, "/dev", "/dev", 0) < 0 || bind_into(root, "/proc", "/proc", 0) < 0 ||
        bind_into(root, "/sys", "/sys", 1) < 0)
        return -1;
    snprintf(sub, sizeof(sub), "%s/hide", image);
    if (hide_paths(root, sub) < 0)
        return -1;
    snprintf(sub, sizeof(sub), "%s/tmp", root);
    if (mkdirs(sub, 01777) < 0 || mount("tmpfs", sub, "tmpfs", 0, "mode=1777") < 0)
        return fail("could not mount a private /tmp: %s", strerror(errno));
    if (vals[O_MOUNTS] && bind_mounts(root, vals[O_MOUNTS]) < 0)
        return -1;
    if (bind_batch_script(sp, root) < 0)
        return -1;
    if (vals[O_MOUNT_HOME] && spank_getenv(sp, "HOME", home, sizeof(home)) == ESPANK_SUCCESS && home[0] == '/' &&
        bind_into(root, home, home, 0) < 0)
        return -1;
    if (chroot(root) < 0 || chdir("/") < 0)
        return fail("could not enter the container root: %s", strerror(errno));
    entered = 1;
    return 0;
}

int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av)
{
    if (!spank_remote(sp) || !vals[O_IMAGE])
        return 0;
    enter_container(sp);
    return 0;  /* errors are reported by slurm_spank_task_init, on the task's stderr */
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    const char *workdir;
    if (!spank_remote(sp) || !vals[O_IMAGE])
        return 0;
    workdir = vals[O_WORKDIR] ? vals[O_WORKDIR] : "/";
    if (!pending_error[0] && !entered)
        fail("the container was not entered (task_init_privileged did not run)");
    if (!pending_error[0] && chdir(workdir) < 0)
        fail("couldn't chdir to %s: %s", workdir, strerror(errno));
    if (pending_error[0]) {
        dprintf(STDERR_FILENO, "slurmstepd: error: pyxis: %s\n", pending_error);
        _exit(1);  /* never run the task on the host instead */
    }
    return 0;
}
