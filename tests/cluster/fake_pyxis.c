/* No-op stand-in for NVIDIA pyxis: accepts the --container-* options of srun/sbatch/salloc.
 * Nothing is containerised. Each option given is exported to the job's tasks as
 * FAKE_PYXIS_<OPTION> (e.g. FAKE_PYXIS_CONTAINER_IMAGE) so tests can assert on it. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <slurm/spank.h>

SPANK_PLUGIN(fake_pyxis, 1);

static int cb(int val, const char *optarg, int remote);

static struct spank_option opts[] = {
    { "container-image", "[USER@][REGISTRY#]IMAGE[:TAG]|PATH", "[fake pyxis] ignored", 1, 0, cb },
    { "container-mounts", "SRC:DST[:FLAGS][,SRC:DST...]", "[fake pyxis] ignored", 1, 1, cb },
    { "container-workdir", "PATH", "[fake pyxis] ignored", 1, 2, cb },
    { "container-name", "NAME", "[fake pyxis] ignored", 1, 3, cb },
    { "container-save", "PATH", "[fake pyxis] ignored", 1, 4, cb },
    { "container-mount-home", NULL, "[fake pyxis] ignored", 0, 5, cb },
    { "no-container-mount-home", NULL, "[fake pyxis] ignored", 0, 6, cb },
    { "container-remap-root", NULL, "[fake pyxis] ignored", 0, 7, cb },
    { "no-container-remap-root", NULL, "[fake pyxis] ignored", 0, 8, cb },
    { "container-entrypoint", NULL, "[fake pyxis] ignored", 0, 9, cb },
    { "no-container-entrypoint", NULL, "[fake pyxis] ignored", 0, 10, cb },
    { "container-entrypoint-log", NULL, "[fake pyxis] ignored", 0, 11, cb },
    { "container-writable", NULL, "[fake pyxis] ignored", 0, 12, cb },
    { "container-readonly", NULL, "[fake pyxis] ignored", 0, 13, cb },
    { "container-env", "NAME[,NAME...]", "[fake pyxis] ignored", 1, 14, cb },
    SPANK_OPTIONS_TABLE_END
};
#define NOPTS 15
static char *vals[NOPTS];

static int cb(int val, const char *optarg, int remote)
{
    if (val < 0 || val >= NOPTS)
        return -1;
    free(vals[val]);
    vals[val] = strdup((optarg && *optarg) ? optarg : "1");
    return 0;
}

/* register from slurm_spank_init (as pyxis does): an exported spank_options table is
 * honoured by srun but not by sbatch/salloc ("sbatch: unrecognized option") */
int slurm_spank_init(spank_t sp, int ac, char **av)
{
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
